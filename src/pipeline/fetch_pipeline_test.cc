#include "pipeline/fetch_pipeline.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn::pipeline {
namespace {

using namespace std::chrono_literals;

ConcurrencyController::Options Fixed(int n) {
  ConcurrencyController::Options o;
  o.adaptive = false;
  o.initial = n;
  return o;
}

FetchPipelineOptions Opts(ConcurrencyController* c, int cpu = 2, uint64_t budget = 1 << 20) {
  FetchPipelineOptions o;
  o.cpu_workers = cpu;
  o.max_io_threads = 16;
  o.max_bytes_in_flight = budget;
  o.controller = c;
  return o;
}

Bytes Payload(size_t i) { return Bytes(1 + i % 7, static_cast<uint8_t>(i)); }

TEST(FetchPipelineTest, EveryItemIsFetchedAndProcessedOnce) {
  constexpr size_t kCount = 2000;
  std::vector<std::atomic<int>> fetched(kCount);
  std::vector<std::atomic<int>> processed(kCount);
  ConcurrencyController c(Fixed(8));
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      kCount,
      [&](size_t i, ReadBuffer* out) -> Status {
        ++fetched[i];
        out->Adopt(Payload(i));
        return Status::Ok();
      },
      [&](size_t i, ReadBuffer& data) -> Status {
        if (Bytes(data.begin(), data.end()) != Payload(i)) {
          return InternalError("wrong data for item " + std::to_string(i));
        }
        ++processed[i];
        return Status::Ok();
      },
      [](size_t) { return uint64_t{16}; }, Opts(&c), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  uint64_t bytes = 0;
  for (size_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(fetched[i].load(), 1) << i;
    ASSERT_EQ(processed[i].load(), 1) << i;
    bytes += Payload(i).size();
  }
  EXPECT_EQ(stats.items, kCount);
  EXPECT_EQ(stats.fetched_bytes, bytes);
  EXPECT_GE(stats.peak_reads_in_flight, 1);
  EXPECT_LE(stats.peak_reads_in_flight, 8);
}

TEST(FetchPipelineTest, BuffersAreRecycled) {
  // With one read in flight and one CPU worker, a handful of buffers serve
  // every item: the fetch sees buffers that already have capacity.
  ConcurrencyController c(Fixed(1));
  std::atomic<int> reused{0};
  Status s = RunFetchPipeline(
      200,
      [&](size_t, ReadBuffer* out) {
        if (out->capacity() >= 4096) ++reused;
        out->Resize(4096);
        std::fill(out->begin(), out->end(), uint8_t{9});
        return Status::Ok();
      },
      [](size_t, ReadBuffer& data) {
        return data.size() == 4096 ? Status::Ok() : InternalError("short buffer");
      },
      [](size_t) { return uint64_t{4096}; }, Opts(&c, 1), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(reused.load(), 150);
}

TEST(FetchPipelineTest, ZeroItemsCallNothing) {
  ConcurrencyController c(Fixed(4));
  bool called = false;
  Status s = RunFetchPipeline(
      0,
      [&](size_t, ReadBuffer*) {
        called = true;
        return Status::Ok();
      },
      [&](size_t, ReadBuffer&) {
        called = true;
        return Status::Ok();
      },
      [](size_t) { return uint64_t{1}; }, Opts(&c), nullptr);
  EXPECT_TRUE(s.ok());
  EXPECT_FALSE(called);
}

TEST(FetchPipelineTest, ReadsInFlightFollowTheLimit) {
  for (int limit : {1, 3, 6}) {
    ConcurrencyController c(Fixed(limit));
    std::atomic<int> now{0};
    std::atomic<int> peak{0};
    FetchPipelineStats stats;
    Status s = RunFetchPipeline(
        48,
        [&](size_t, ReadBuffer* out) {
          int n = ++now;
          int p = peak.load();
          while (n > p && !peak.compare_exchange_weak(p, n)) {
          }
          // Held until `limit` reads overlap (a fixed sleep could end
          // before a late-started thread joined on a loaded machine).
          const auto give_up = std::chrono::steady_clock::now() + 10s;
          while (peak.load() < limit && std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(1ms);
          }
          std::this_thread::sleep_for(1ms);
          --now;
          out->Adopt(Bytes(10, 1));
          return Status::Ok();
        },
        [](size_t, ReadBuffer&) { return Status::Ok(); }, [](size_t) { return uint64_t{10}; },
        Opts(&c), &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_LE(peak.load(), limit);
    EXPECT_EQ(peak.load(), limit) << "the limit was never reached with slow reads";
    EXPECT_LE(stats.peak_reads_in_flight, limit);
  }
}

TEST(FetchPipelineTest, ByteBudgetBoundsMemory) {
  ConcurrencyController c(Fixed(16));
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      200,
      [](size_t, ReadBuffer* out) {
        out->Adopt(Bytes(100, 7));
        return Status::Ok();
      },
      [](size_t, ReadBuffer&) {
        std::this_thread::sleep_for(100us);  // slow CPU stage: items pile up
        return Status::Ok();
      },
      [](size_t) { return uint64_t{100}; }, Opts(&c, 1, 350), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_LE(stats.peak_bytes_in_flight, 350u);
  EXPECT_EQ(stats.items, 200u);
}

TEST(FetchPipelineTest, ItemLargerThanTheBudgetStillRuns) {
  ConcurrencyController c(Fixed(4));
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      10,
      [](size_t, ReadBuffer* out) {
        out->Adopt(Bytes(1, 1));
        return Status::Ok();
      },
      [](size_t, ReadBuffer&) { return Status::Ok(); }, [](size_t) { return uint64_t{1000}; },
      Opts(&c, 2, 100), &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.items, 10u);
  EXPECT_EQ(stats.peak_bytes_in_flight, 1000u);  // one at a time
}

TEST(FetchPipelineTest, FetchErrorCancelsAndIsReturned) {
  constexpr size_t kCount = 5000;
  ConcurrencyController c(Fixed(4));
  std::atomic<size_t> fetches{0};
  Status s = RunFetchPipeline(
      kCount,
      [&](size_t i, ReadBuffer* out) -> Status {
        ++fetches;
        if (i == 20) return DataLossError("chunk 20 is damaged");
        std::this_thread::sleep_for(200us);
        out->Adopt(Bytes(8, 0));
        return Status::Ok();
      },
      [](size_t, ReadBuffer&) { return Status::Ok(); }, [](size_t) { return uint64_t{8}; },
      Opts(&c), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "chunk 20 is damaged");
  EXPECT_LT(fetches.load(), kCount / 2) << "the pipeline kept going after the error";
}

TEST(FetchPipelineTest, ProcessErrorCancelsAndIsReturned) {
  constexpr size_t kCount = 5000;
  ConcurrencyController c(Fixed(4));
  std::atomic<size_t> fetches{0};
  Status s = RunFetchPipeline(
      kCount,
      [&](size_t, ReadBuffer* out) {
        ++fetches;
        std::this_thread::sleep_for(100us);
        out->Adopt(Bytes(8, 0));
        return Status::Ok();
      },
      [](size_t i, ReadBuffer&) {
        return i == 7 ? UnavailableError("sink went away") : Status::Ok();
      },
      [](size_t) { return uint64_t{8}; }, Opts(&c), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_LT(fetches.load(), kCount / 2);
}

TEST(FetchPipelineTest, StopEndsTheRunAndItemsStartedAreStillProcessed) {
  constexpr size_t kCount = 5000;
  for (int reads : {1, 4, 16}) {
    ConcurrencyController c(Fixed(reads));
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::vector<size_t> fetched, processed;
    auto options = Opts(&c);
    // The first item the stop turned away: the run's end.
    size_t stopped_at = kCount;
    options.stop = [&](size_t next) {
      if (!stop.load()) return false;
      stopped_at = std::min(stopped_at, next);  // asked under the admission lock
      return true;
    };
    FetchPipelineStats stats;
    Status s = RunFetchPipeline(
        kCount,
        [&](size_t i, ReadBuffer* out) {
          if (i == 30) stop = true;  // items up to here, and any already started, finish
          std::this_thread::sleep_for(i < 30 ? 0us : 300us);
          {
            std::lock_guard lock(mu);
            fetched.push_back(i);
          }
          out->Adopt(Payload(i));
          return Status::Ok();
        },
        [&](size_t i, ReadBuffer& data) {
          EXPECT_EQ(data.span().size(), Payload(i).size());
          std::lock_guard lock(mu);
          processed.push_back(i);
          return Status::Ok();
        },
        [](size_t) { return uint64_t{8}; }, options, &stats);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(stats.stopped);
    std::sort(fetched.begin(), fetched.end());
    std::sort(processed.begin(), processed.end());
    EXPECT_EQ(processed, fetched) << "an item started before the stop was dropped";
    ASSERT_GE(fetched.size(), 31u);
    for (size_t k = 0; k < fetched.size(); ++k) ASSERT_EQ(fetched[k], k);  // a prefix
    // Everything before the item turned away ran, nothing after it. (How
    // far past item 30 that is depends on how late fetch(30) ran: on a
    // loaded machine other threads may admit several rounds of reads first.)
    EXPECT_EQ(fetched.size(), stopped_at) << reads;
  }
}

TEST(FetchPipelineTest, StopThatNeverFiresChangesNothing) {
  ConcurrencyController c(Fixed(4));
  auto options = Opts(&c);
  std::atomic<size_t> asked{0}, processed{0};
  options.stop = [&](size_t) {
    ++asked;
    return false;
  };
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      100,
      [](size_t i, ReadBuffer* out) {
        out->Adopt(Payload(i));
        return Status::Ok();
      },
      [&](size_t, ReadBuffer&) {
        ++processed;
        return Status::Ok();
      },
      [](size_t) { return uint64_t{8}; }, options, &stats);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(processed.load(), 100u);
  EXPECT_GE(asked.load(), 100u);
  EXPECT_FALSE(stats.stopped);
}

TEST(FetchPipelineTest, AFeedAdmitsItemsThatArriveDuringTheRunUntilClosed) {
  ConcurrencyController c(Fixed(4));
  ItemFeed feed(/*idle_timeout_ns=*/60'000'000'000);  // only Close ends this run
  std::vector<std::atomic<int>> processed(100);
  FetchPipelineOptions o = Opts(&c);
  o.feed = &feed;
  feed.Add(10);
  std::thread producer([&] {
    // More items, in bursts, once the first ones are done: the run waits.
    while (processed[9].load() == 0) std::this_thread::yield();
    for (int burst = 0; burst < 9; ++burst) {
      std::this_thread::sleep_for(2ms);
      feed.Add(10);
    }
    while (processed[99].load() == 0) std::this_thread::yield();
    feed.Close();
  });
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      SIZE_MAX / 2,
      [&](size_t i, ReadBuffer* out) {
        out->Adopt(Payload(i));
        return Status::Ok();
      },
      [&](size_t i, ReadBuffer&) {
        ++processed[i];
        return Status::Ok();
      },
      [](size_t) { return uint64_t{16}; }, o, &stats);
  producer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.items, 100u);
  for (size_t i = 0; i < processed.size(); ++i) EXPECT_EQ(processed[i].load(), 1) << i;
}

TEST(FetchPipelineTest, AFeedThatStaysEmptyEndsTheRunAfterItsIdleTimeout) {
  ConcurrencyController c(Fixed(2));
  ItemFeed feed(/*idle_timeout_ns=*/20'000'000);
  feed.Add(3);
  FetchPipelineOptions o = Opts(&c);
  o.feed = &feed;
  FetchPipelineStats stats;
  Status s = RunFetchPipeline(
      SIZE_MAX / 2, [&](size_t i, ReadBuffer* out) {
        out->Adopt(Payload(i));
        return Status::Ok();
      },
      [&](size_t, ReadBuffer&) { return Status::Ok(); }, [](size_t) { return uint64_t{16}; }, o,
      &stats);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(stats.items, 3u);
  feed.Add(1);  // after the run: no waker left to call
}

TEST(FetchPipelineTest, ExceptionBecomesInternal) {
  ConcurrencyController c(Fixed(2));
  Status s = RunFetchPipeline(
      10,
      [](size_t i, ReadBuffer* out) -> Status {
        if (i == 3) throw std::runtime_error("bad fetch");
        out->Adopt(Bytes(1, 0));
        return Status::Ok();
      },
      [](size_t, ReadBuffer&) { return Status::Ok(); }, [](size_t) { return uint64_t{1}; },
      Opts(&c), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("bad fetch"), std::string_view::npos);
}

TEST(FetchPipelineTest, AdaptiveControllerCompletes) {
  ConcurrencyController::Options o;
  o.adaptive = true;
  o.initial = 2;
  o.window_ns = 5'000'000;
  ConcurrencyController c(o);
  std::atomic<size_t> done{0};
  Status s = RunFetchPipeline(
      400,
      [](size_t, ReadBuffer* out) {
        std::this_thread::sleep_for(500us);
        out->Adopt(Bytes(1000, 3));
        return Status::Ok();
      },
      [&](size_t, ReadBuffer&) {
        ++done;
        return Status::Ok();
      },
      [](size_t) { return uint64_t{1000}; }, Opts(&c, 2, 1 << 20), nullptr);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(done.load(), 400u);
  EXPECT_GE(c.limit(), 1);
}

}  // namespace
}  // namespace cairn::pipeline
