// FetchPipeline: the one chunk pipeline behind restore, verify, sync and
// the readahead of mount and NBD: work items 0..count-1 flow through
//
//   I/O stage   keeps up to controller->limit() reads in flight; items
//               start in index order, so the caller orders its plan to suit
//               the source. Two ways, by what the source's reads are:
//               blocking reads (fetch(i): a local file, a network request)
//               run on a pool of I/O threads, one read each; asynchronous
//               reads (options.fetch_async: an object store's GET on its
//               client's event loop) are issued by one thread, and the
//               reads in flight are callbacks still to come, not threads;
//   CPU stage   cpu_workers threads call process(i, bytes) (check, decode,
//               write) in completion order.
//
// Buffers are recycled through a pool, so a run allocates about as many
// chunk buffers as it has items in flight, not one per item.
// Items admitted but not yet processed are at most the read limit plus
// twice the CPU workers (a short queue), so a CPU-bound run keeps few
// buffers alive. Memory is also capped by bytes in flight: before fetching
// item i the I/O stage
// reserves size_hint(i) bytes of the budget, and the reservation is returned
// when process(i) is done (one item may always proceed, so an item larger
// than the budget cannot deadlock). The first error from either stage
// cancels everything and is returned; no new item starts after it, and
// items fetched but not processed are dropped. A stop (options.stop: a time
// slice's end, a cancelled task) is gentler: no new item starts, the ones
// already started are fetched and processed, and the run returns Ok. A feed
// (options.feed) lets items arrive during the run.
//
// Thread safety: RunFetchPipeline blocks the caller; fetch, fetch_async,
// process and size_hint are called concurrently from pipeline threads (and
// fetch_async's `done` from the source's) and must be thread-safe. The run
// returns only after every `done` of fetch_async has run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "base/bytes.h"
#include "base/mutex.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "pipeline/concurrency_controller.h"
#include "pipeline/progress.h"

namespace cairn::pipeline {

// Items that arrive while a run goes on (readahead: chunks are queued as a
// reader moves on). With a feed, item i starts once i < available(); the
// I/O threads wait for more, and the run ends when the feed is closed and
// its items are done, or when nothing arrived and nothing was in flight for
// idle_timeout_ns (so idle threads do not stay). Threads live as long as
// the run, instead of one set per batch of items.
//
// Thread safety: Add and Close from any thread.
class ItemFeed {
 public:
  explicit ItemFeed(int64_t idle_timeout_ns) : idle_timeout_ns_(idle_timeout_ns) {}
  // `n` more items (indexes available() .. available() + n - 1).
  void Add(size_t n);
  // No more items: the run ends after the ones available.
  void Close();

  size_t available() const { return available_.load(std::memory_order_acquire); }
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  int64_t idle_timeout_ns() const { return idle_timeout_ns_; }
  // The pipeline's hook: called after Add and Close (while it runs).
  void SetWaker(std::function<void()> waker);

 private:
  const int64_t idle_timeout_ns_;
  std::atomic<size_t> available_{0};
  std::atomic<bool> closed_{false};
  Mutex mu_;
  std::function<void()> waker_ GUARDED_BY(mu_);
};

// Completion of an asynchronous fetch.
using FetchDoneFn = std::function<void(Status)>;
// Starts fetching item `index` into `out` (a recycled buffer, the fetch's
// until `done` runs) and returns without waiting; `done` runs exactly once,
// on any thread, possibly before this returns. `done` only hands the item
// to the pipeline (it takes short locks, never blocks on the CPU stage), so
// a source's event loop may call it.
using AsyncFetchFn = std::function<void(size_t index, ReadBuffer* out, FetchDoneFn done)>;

struct FetchPipelineOptions {
  int cpu_workers = 0;     // 0: one per core
  int max_io_threads = 64;  // upper bound of reads in flight
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  ConcurrencyController* controller = nullptr;  // REQUIRED; outlives the call
  // Optional: gets the current read limit, and into its stage meter the
  // time of every read (Stage::kSourceReads) and of every wait of a CPU
  // worker for one (Stage::kReadWait); process() times its own parts.
  Progress* progress = nullptr;
  // Optional: asked before item `next` starts; true ends the run there.
  // Called with the pipeline's admission lock held: keep it cheap.
  std::function<bool(size_t next)> stop;
  // Optional: items arrive while the run goes on (see ItemFeed); `count`
  // then only bounds them. Consumers' waits are not reported to the
  // controller (waiting for a reader is not waiting for reads).
  ItemFeed* feed = nullptr;
  // Optional: fetch without waiting (see AsyncFetchFn). When set, it is
  // used instead of `fetch`: one I/O thread issues the reads and
  // max_io_threads bounds the reads in flight instead of the threads.
  AsyncFetchFn fetch_async;
};

struct FetchPipelineStats {
  uint64_t items = 0;
  uint64_t fetched_bytes = 0;
  uint64_t peak_bytes_in_flight = 0;
  int peak_reads_in_flight = 0;
  bool stopped = false;  // options.stop ended the run before its last item
  int io_threads = 0;    // threads of the I/O stage (1 with fetch_async)
};

// Fetches item `index` into `out` (a recycled buffer: reuse its capacity).
using FetchFn = std::function<Status(size_t index, ReadBuffer* out)>;
// Processes a fetched item. The buffer goes back to the pool afterwards.
using ProcessFn = std::function<Status(size_t index, ReadBuffer& data)>;
using SizeHintFn = std::function<uint64_t(size_t index)>;

Status RunFetchPipeline(size_t count, const FetchFn& fetch, const ProcessFn& process,
                        const SizeHintFn& size_hint, const FetchPipelineOptions& options,
                        FetchPipelineStats* stats);

}  // namespace cairn::pipeline
