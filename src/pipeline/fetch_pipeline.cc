#include "pipeline/fetch_pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <memory>
#include <thread>

#include "pipeline/bounded_queue.h"
#include "pipeline/buffer_pool.h"
#include "pipeline/worker_group.h"

namespace cairn::pipeline {
namespace {

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Fetched {
  size_t index;
  uint64_t reserved;
  ReadBuffer data;
};

// Admission control of the I/O stage: reads in flight and bytes reserved.
class Gate {
 public:
  // `max_reads` caps the controller's limit (the asynchronous I/O stage has
  // no threads that would).
  Gate(size_t count, uint64_t max_bytes, int slack, int max_reads,
       ConcurrencyController& controller, const SizeHintFn& size_hint,
       const std::function<bool(size_t)>& stop, ItemFeed* feed)
      : count_(count), max_bytes_(max_bytes), slack_(slack), max_reads_(max_reads),
        controller_(controller), size_hint_(size_hint), stop_(stop), feed_(feed) {}

  // Blocks until the next item may start; false when there is none left,
  // the caller's stop said so, or the pipeline was cancelled.
  bool Admit(size_t* index, uint64_t* reserved) {
    MutexLock lock(mu_);
    while (true) {
      if (cancelled_ || next_ >= count_) return false;
      if (stop_ && stop_(next_)) {
        stopped_ = true;
        count_ = next_;    // the end is here: items started still finish
        cv_.NotifyAll();  // every waiting thread may leave
        return false;
      }
      if (feed_ != nullptr && next_ >= feed_->available()) {
        // Nothing to start yet: wait for the feed, end when it is closed,
        // or when it stayed empty with nothing in flight for a while.
        if (feed_->closed() && next_ >= feed_->available()) {
          count_ = next_;
          cv_.NotifyAll();
          return false;
        }
        const auto idle = std::chrono::nanoseconds(feed_->idle_timeout_ns());
        if (!cv_.WaitFor(mu_, idle) &&
            next_ >= feed_->available() && reads_ == 0 && outstanding_ == 0) {
          count_ = next_;
          cv_.NotifyAll();
          return false;
        }
        continue;
      }
      if (CanAdmitLocked()) {
        *index = next_++;
        *reserved = size_hint_(*index);
        ++reads_;
        ++outstanding_;
        bytes_ += *reserved;
        peak_reads_ = std::max(peak_reads_, reads_);
        peak_bytes_ = std::max(peak_bytes_, bytes_);
        if (next_ >= count_) {
          cv_.NotifyAll();  // nothing left: every waiting thread may leave
        } else if (CanAdmitLocked()) {
          cv_.NotifyOne();  // room for one more (a release can free several slots)
        }
        return true;
      }
      // Woken by a finished read or item (one thread per freed slot), by a
      // higher limit (LimitRaised) or by the end.
      cv_.Wait(mu_);
    }
  }

  // On the I/O threads (`wake` false) this wakes nobody: the thread that
  // finished the read comes back to Admit and takes the slot itself.
  // Handing it to a sleeping thread cost two context switches per chunk,
  // and when the cores are busy the woken thread waits for one while the
  // slot stays unused: with reads from the page cache, --jobs auto (64
  // threads, one read in flight) ran 10 % (verify) and 28 % (restore)
  // slower than --jobs 1 (one thread). An asynchronous read's completion
  // (`wake` true) wakes the issuing thread, which may be waiting for it.
  void ReadDone(bool wake) {
    {
      MutexLock lock(mu_);
      --reads_;
    }
    if (wake) cv_.NotifyOne();
  }

  void Release(uint64_t bytes) {
    {
      MutexLock lock(mu_);
      bytes_ -= bytes;
      --outstanding_;
    }
    cv_.NotifyOne();
  }

  // The controller allowed more reads: several threads may start now.
  void LimitRaised() {
    { MutexLock lock(mu_); }
    cv_.NotifyAll();
  }

  void Cancel() {
    {
      MutexLock lock(mu_);
      cancelled_ = true;
    }
    cv_.NotifyAll();
  }

  // True when the next item fits the read limit, the outstanding cap and
  // the byte budget. REQUIRES: next_ < count_.
  bool CanAdmitLocked() const REQUIRES(mu_) {
    const int limit = std::min(controller_.limit(), max_reads_);
    const uint64_t hint = size_hint_(next_);
    const bool fits = bytes_ == 0 || bytes_ + hint <= max_bytes_;
    // Items admitted but not yet processed: the reads in flight plus a
    // short queue for the CPU stage. When the CPU stage is the bottleneck
    // this binds, not the read limit, and few buffers are in use.
    return reads_ < limit && outstanding_ < limit + slack_ && fits;
  }

  void FillStats(FetchPipelineStats* stats) {
    MutexLock lock(mu_);
    stats->peak_reads_in_flight = peak_reads_;
    stats->peak_bytes_in_flight = peak_bytes_;
    stats->stopped = stopped_;
  }

 private:
  size_t count_ GUARDED_BY(mu_);  // lowered by a stop
  const uint64_t max_bytes_;
  const int slack_;
  const int max_reads_;
  ConcurrencyController& controller_;
  const SizeHintFn& size_hint_;
  const std::function<bool(size_t)>& stop_;
  ItemFeed* const feed_;
  Mutex mu_;
  CondVar cv_;
  size_t next_ GUARDED_BY(mu_) = 0;
  int reads_ GUARDED_BY(mu_) = 0;
  int outstanding_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  int peak_reads_ GUARDED_BY(mu_) = 0;
  uint64_t peak_bytes_ GUARDED_BY(mu_) = 0;
  bool cancelled_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
};

// The end of one read, from either I/O stage: feeds the controller and
// the meter and queues the item for the CPU stage.
class ReadCompletion {
 public:
  ReadCompletion(Gate& gate, ConcurrencyController& controller, Progress* progress,
                 BoundedQueue<Fetched>& queue)
      : gate_(gate), controller_(controller), progress_(progress), meter_(MeterOf(progress)),
        queue_(queue) {}

  // The read of `index` (started at `start_ns`) ended with `read`. Returns
  // its error, which fails the run; *queued says whether the queue took the
  // item (false: the run is ending). `wake`: see Gate::ReadDone. Never
  // blocks: the queue has room for every item admitted.
  Status Complete(size_t index, uint64_t reserved, int64_t start_ns, Status read,
                  ReadBuffer data, bool wake, bool* queued) {
    *queued = false;
    const int64_t end = NowNanos();
    gate_.ReadDone(wake);
    if (meter_ != nullptr) meter_->Add(Stage::kSourceReads, end - start_ns);
    if (!read.ok()) {
      gate_.Release(reserved);
      return read;
    }
    const int limit_before = controller_.limit();
    controller_.OnComplete(data.size(), end - start_ns, end);
    const int limit_after = controller_.limit();
    if (limit_after > limit_before) gate_.LimitRaised();
    if (progress_ != nullptr) {
      progress_->reads_limit.store(limit_after, std::memory_order_relaxed);
    }
    fetched_bytes_.fetch_add(data.size(), std::memory_order_relaxed);
    *queued = queue_.Push(Fetched{index, reserved, std::move(data)});
    return Status::Ok();
  }

  uint64_t fetched_bytes() const { return fetched_bytes_.load(); }

 private:
  Gate& gate_;
  ConcurrencyController& controller_;
  Progress* const progress_;
  StageMeter* const meter_;
  BoundedQueue<Fetched>& queue_;
  std::atomic<uint64_t> fetched_bytes_{0};
};

// Asynchronous reads whose `done` has not run yet: the issuing thread
// waits for the last before the run may end (its state lives on the stack).
class PendingReads {
 public:
  void Add() {
    MutexLock lock(mu_);
    ++count_;
  }
  // The last thing a `done` does: after it the run may end. Notifies under
  // the lock: the waiter's stack (this object) may go once it is released.
  void Done() {
    MutexLock lock(mu_);
    if (--count_ == 0) cv_.NotifyAll();
  }
  void WaitNone() {
    MutexLock lock(mu_);
    while (count_ != 0) cv_.Wait(mu_);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int count_ GUARDED_BY(mu_) = 0;
};

// One asynchronous read: the buffer it fills lives here until its `done`.
struct AsyncRead {
  size_t index;
  uint64_t reserved;
  int64_t start_ns;
  ReadBuffer data;
};

}  // namespace

void ItemFeed::Add(size_t n) {
  MutexLock lock(mu_);
  available_.fetch_add(n, std::memory_order_acq_rel);
  if (waker_) waker_();
}

void ItemFeed::Close() {
  MutexLock lock(mu_);
  closed_.store(true, std::memory_order_release);
  if (waker_) waker_();
}

void ItemFeed::SetWaker(std::function<void()> waker) {
  MutexLock lock(mu_);
  waker_ = std::move(waker);
}

Status RunFetchPipeline(size_t count, const FetchFn& fetch, const ProcessFn& process,
                        const SizeHintFn& size_hint, const FetchPipelineOptions& options,
                        FetchPipelineStats* stats) {
  if (count == 0) return Status::Ok();
  ConcurrencyController& controller = *options.controller;
  const int cpu_workers =
      options.cpu_workers > 0
          ? options.cpu_workers
          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // No more reads in flight (blocking: I/O threads) than may ever be: a
  // pinned limit needs exactly that many.
  const int max_reads = static_cast<int>(std::min<size_t>(
      count,
      static_cast<size_t>(std::max(
          1, controller.adaptive() ? options.max_io_threads : controller.limit()))));
  const bool async = static_cast<bool>(options.fetch_async);
  const int io_threads = async ? 1 : max_reads;

  Gate gate(count, options.max_bytes_in_flight, 2 * cpu_workers, async ? max_reads : INT_MAX,
            controller, size_hint, options.stop, options.feed);
  if (options.feed != nullptr) options.feed->SetWaker([&gate] { gate.LimitRaised(); });
  struct Unhook {
    ItemFeed* feed;
    ~Unhook() {
      if (feed != nullptr) feed->SetWaker(nullptr);
    }
  } unhook{options.feed};
  // The byte budget bounds what the queue holds; its capacity only needs to
  // never be the tighter limit (and an asynchronous read's `done` must
  // never wait for room: items admitted are at most max_reads + slack).
  BoundedQueue<Fetched> queue(static_cast<size_t>(max_reads + 2 * cpu_workers) + 1024);
  std::atomic<int> io_alive{io_threads};
  std::atomic<uint64_t> items{0};
  ReadBufferPool pool(static_cast<size_t>(max_reads + cpu_workers) * 2);
  ReadCompletion completion(gate, controller, options.progress, queue);
  PendingReads pending;
  WorkerGroup group([&] {
    gate.Cancel();
    queue.Cancel();
  });

  group.Start(io_threads, [&](int) -> Status {
    struct CloseWhenLast {
      std::atomic<int>& alive;
      BoundedQueue<Fetched>& queue;
      ~CloseWhenLast() {
        if (alive.fetch_sub(1) == 1) queue.Close();
      }
    } close_when_last{io_alive, queue};
    size_t index;
    uint64_t reserved;
    if (async) {
      // Issues every read and returns when the last one's `done` has run.
      while (gate.Admit(&index, &reserved)) {
        auto read = std::make_shared<AsyncRead>(AsyncRead{index, reserved, NowNanos(), pool.Take()});
        pending.Add();
        options.fetch_async(index, &read->data, [&, read](Status s) {
          bool queued;
          Status r = completion.Complete(read->index, read->reserved, read->start_ns,
                                         std::move(s), std::move(read->data), true, &queued);
          if (!r.ok()) group.Fail(std::move(r));
          pending.Done();
        });
      }
      pending.WaitNone();
      return Status::Ok();
    }
    while (gate.Admit(&index, &reserved)) {
      ReadBuffer data = pool.Take();
      const int64_t start = NowNanos();
      Status s = fetch(index, &data);
      bool queued;
      CAIRN_RETURN_IF_ERROR(
          completion.Complete(index, reserved, start, std::move(s), std::move(data), false, &queued));
      if (!queued) return Status::Ok();
    }
    return Status::Ok();
  });

  controller.SetConsumers(cpu_workers);
  const bool report_waits = controller.adaptive() && options.feed == nullptr;
  StageMeter* const meter = MeterOf(options.progress);
  group.Start(cpu_workers, [&](int) -> Status {
    // This worker's stage times count 1/cpu_workers each (stage_meter.h).
    Lanes lanes(cpu_workers);
    CpuWaitScope cpu_wait(meter);
    for (;;) {
      const int64_t wait_start = report_waits || meter != nullptr ? NowNanos() : 0;
      auto item = queue.Pop();
      if (!item) break;
      if (report_waits || meter != nullptr) {
        const int64_t waited = NowNanos() - wait_start;
        if (report_waits) controller.OnConsumerWait(waited);
        if (meter != nullptr) meter->Add(Stage::kReadWait, waited);
      }
      Status s = process(item->index, item->data);
      pool.Give(std::move(item->data));
      gate.Release(item->reserved);
      CAIRN_RETURN_IF_ERROR(s);
      items.fetch_add(1, std::memory_order_relaxed);
    }
    return Status::Ok();
  });

  Status result = group.Wait();
  if (stats != nullptr) {
    gate.FillStats(stats);
    stats->items = items.load();
    stats->fetched_bytes = completion.fetched_bytes();
    stats->io_threads = io_threads;
  }
  return result;
}

}  // namespace cairn::pipeline
