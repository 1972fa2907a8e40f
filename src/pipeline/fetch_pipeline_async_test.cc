// The fetch pipeline's asynchronous I/O stage (options.fetch_async): reads
// issued from one thread, completed by a fake source's own threads out of
// order, with errors, and a run that ends only after every completion.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pipeline/fetch_pipeline.h"

namespace cairn::pipeline {
namespace {

using namespace std::chrono_literals;

// Reads in flight pinned at n, as `--jobs n` pins them.
ConcurrencyController::Options Fixed(int n) { return ConcurrencyController::Options::ForJobs(n, n); }

Bytes Payload(size_t i) { return Bytes(1 + i % 13, static_cast<uint8_t>(i * 7)); }

// A source whose reads complete on its own threads (as an S3 client's event
// loop does): it holds what was asked until `batch` reads wait (or `patience`
// passed since the last arrived), then completes them in a shuffled order,
// after `delay`. Item `fail_at` fails with DataLoss. Records the threads
// that issued reads and the most reads outstanding at once.
class FakeAsyncSource {
 public:
  FakeAsyncSource(size_t batch, std::chrono::microseconds delay = 0us,
                  size_t fail_at = SIZE_MAX)
      : batch_(batch), delay_(delay), fail_at_(fail_at) {
    for (int i = 0; i < 2; ++i) completers_.emplace_back([this] { Complete(); });
  }
  ~FakeAsyncSource() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
  }

  AsyncFetchFn Fn() {
    return [this](size_t index, ReadBuffer* out, FetchDoneFn done) {
      std::lock_guard lock(mu_);
      issuers_.insert(std::this_thread::get_id());
      waiting_.push_back(Read{index, out, std::move(done)});
      ++outstanding_;
      peak_ = std::max(peak_, outstanding_);
      last_arrival_ = std::chrono::steady_clock::now();
      cv_.notify_one();
    };
  }

  size_t issuers() {
    std::lock_guard lock(mu_);
    return issuers_.size();
  }
  int peak() {
    std::lock_guard lock(mu_);
    return peak_;
  }
  int outstanding() {
    std::lock_guard lock(mu_);
    return outstanding_;
  }
  int completer_calls() { return completer_calls_.load(); }

 private:
  struct Read {
    size_t index;
    ReadBuffer* out;
    FetchDoneFn done;
  };

  void Complete() {
    std::minstd_rand rng(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait_for(lock, 1ms, [&] { return stop_ || waiting_.size() >= batch_; });
      if (stop_ && waiting_.empty()) return;
      const bool patient = std::chrono::steady_clock::now() - last_arrival_ < 2ms;
      if (waiting_.empty() || (waiting_.size() < batch_ && patient && !stop_)) continue;
      std::vector<Read> reads = std::move(waiting_);
      waiting_.clear();
      lock.unlock();
      std::shuffle(reads.begin(), reads.end(), rng);
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      for (Read& r : reads) {
        ++completer_calls_;
        {
          std::lock_guard count(mu_);
          --outstanding_;
        }
        if (r.index == fail_at_) {
          r.done(DataLossError("chunk " + std::to_string(r.index) + ": damaged"));
        } else {
          r.out->Adopt(Payload(r.index));
          r.done(Status::Ok());
        }
      }
      lock.lock();
    }
  }

  const size_t batch_;
  const std::chrono::microseconds delay_;
  const size_t fail_at_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Read> waiting_;
  std::set<std::thread::id> issuers_;
  int outstanding_ = 0;
  int peak_ = 0;
  bool stop_ = false;
  std::chrono::steady_clock::time_point last_arrival_;
  std::atomic<int> completer_calls_{0};
  std::vector<std::jthread> completers_;  // last: joined first
};

FetchPipelineOptions Opts(ConcurrencyController* c, int max_reads) {
  FetchPipelineOptions o;
  o.cpu_workers = 2;
  o.max_io_threads = max_reads;
  o.controller = c;
  return o;
}

Status NoBlockingFetch(size_t, ReadBuffer*) { return InternalError("blocking fetch called"); }

// Runs `count` items and returns each item's bytes as processed.
Status Collect(size_t count, const FetchFn& fetch, const FetchPipelineOptions& options,
               std::vector<Bytes>* out, FetchPipelineStats* stats) {
  out->assign(count, Bytes());
  std::mutex mu;
  return RunFetchPipeline(
      count, fetch,
      [&](size_t i, ReadBuffer& data) -> Status {
        std::lock_guard lock(mu);
        if (!(*out)[i].empty()) return InternalError("item processed twice");
        (*out)[i].assign(data.begin(), data.end());
        return Status::Ok();
      },
      [](size_t) { return uint64_t{16}; }, options, stats);
}

TEST(FetchPipelineAsyncTest, ManyReadsInFlightFromOneThreadGiveWhatTheBlockingPathGives) {
  constexpr size_t kCount = 3000;
  constexpr int kReads = 64;
  FakeAsyncSource source(kReads);
  ConcurrencyController c(Fixed(kReads));
  FetchPipelineOptions options = Opts(&c, kReads);
  options.fetch_async = source.Fn();
  std::vector<Bytes> async_bytes;
  FetchPipelineStats async_stats;
  Status s = Collect(kCount, NoBlockingFetch, options, &async_bytes, &async_stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(async_stats.io_threads, 1);
  EXPECT_EQ(source.issuers(), 1u);
  // The reads in flight were the limit's 64, from that one thread.
  EXPECT_EQ(source.peak(), kReads);
  EXPECT_EQ(async_stats.peak_reads_in_flight, kReads);
  EXPECT_EQ(source.outstanding(), 0);

  ConcurrencyController blocking_c(Fixed(kReads));
  std::vector<Bytes> sync_bytes;
  FetchPipelineStats sync_stats;
  s = Collect(
      kCount,
      [](size_t i, ReadBuffer* out) {
        out->Adopt(Payload(i));
        return Status::Ok();
      },
      Opts(&blocking_c, kReads), &sync_bytes, &sync_stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sync_stats.io_threads, kReads);
  EXPECT_EQ(async_bytes, sync_bytes);
  EXPECT_EQ(async_stats.items, sync_stats.items);
  EXPECT_EQ(async_stats.fetched_bytes, sync_stats.fetched_bytes);
}

TEST(FetchPipelineAsyncTest, AdaptiveLimitStaysUnderTheCeiling) {
  FakeAsyncSource source(8, 200us);
  ConcurrencyController::Options co;
  co.initial = 4;
  co.max = 32;
  co.window_ns = 5'000'000;
  ConcurrencyController c(co);
  FetchPipelineOptions options = Opts(&c, 32);
  options.fetch_async = source.Fn();
  std::vector<Bytes> bytes;
  FetchPipelineStats stats;
  Status s = Collect(2000, NoBlockingFetch, options, &bytes, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], Payload(i)) << i;
  EXPECT_EQ(source.issuers(), 1u);
  EXPECT_LE(source.peak(), 32);
  EXPECT_LE(stats.peak_reads_in_flight, 32);
}

TEST(FetchPipelineAsyncTest, ReadErrorFailsTheRunAfterEveryCompletion) {
  // Completions come late, so many reads are outstanding when item 700's
  // error cancels the run: it must still wait for every one of them.
  FakeAsyncSource source(16, 3ms, /*fail_at=*/700);
  ConcurrencyController c(Fixed(32));
  FetchPipelineOptions options = Opts(&c, 32);
  options.fetch_async = source.Fn();
  std::vector<Bytes> bytes;
  Status s = Collect(5000, NoBlockingFetch, options, &bytes, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("chunk 700"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(source.outstanding(), 0);
  EXPECT_LT(source.completer_calls(), 5000);  // cancelled: not every item was read
}

TEST(FetchPipelineAsyncTest, ProcessErrorWaitsForOutstandingReads) {
  FakeAsyncSource source(16, 3ms);
  ConcurrencyController c(Fixed(32));
  FetchPipelineOptions options = Opts(&c, 32);
  options.fetch_async = source.Fn();
  Status s = RunFetchPipeline(
      5000, NoBlockingFetch,
      [](size_t i, ReadBuffer&) { return i == 40 ? InternalError("write failed") : Status::Ok(); },
      [](size_t) { return uint64_t{16}; }, options, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(source.outstanding(), 0);
}

TEST(FetchPipelineAsyncTest, StopLetsOutstandingReadsFinishAndBeProcessed) {
  FakeAsyncSource source(8, 2ms);
  ConcurrencyController c(Fixed(16));
  FetchPipelineOptions options = Opts(&c, 16);
  options.fetch_async = source.Fn();
  options.stop = [](size_t next) { return next >= 100; };
  std::vector<Bytes> bytes;
  FetchPipelineStats stats;
  Status s = Collect(1000, NoBlockingFetch, options, &bytes, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(stats.stopped);
  EXPECT_EQ(stats.items, 100u);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(bytes[i], Payload(i)) << i;
  EXPECT_EQ(source.outstanding(), 0);
}

TEST(FetchPipelineAsyncTest, ReadsThatCompleteOnTheIssuingThreadWork) {
  // A source may call `done` before its read call returns.
  ConcurrencyController c(Fixed(8));
  FetchPipelineOptions options = Opts(&c, 8);
  options.fetch_async = [](size_t i, ReadBuffer* out, FetchDoneFn done) {
    out->Adopt(Payload(i));
    done(Status::Ok());
  };
  std::vector<Bytes> bytes;
  FetchPipelineStats stats;
  Status s = Collect(500, NoBlockingFetch, options, &bytes, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], Payload(i)) << i;
  EXPECT_EQ(stats.io_threads, 1);
}

}  // namespace
}  // namespace cairn::pipeline
