#include "pipeline/worker_group.h"

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "pipeline/bounded_queue.h"

namespace cairn::pipeline {
namespace {

using namespace std::chrono_literals;

TEST(WorkerGroupTest, RunsEveryWorkerWithItsIndex) {
  std::atomic<int> mask{0};
  WorkerGroup group;
  group.Start(4, [&](int i) {
    mask |= 1 << i;
    return Status::Ok();
  });
  EXPECT_TRUE(group.Wait().ok());
  EXPECT_EQ(mask.load(), 0b1111);
  EXPECT_FALSE(group.failed());
}

TEST(WorkerGroupTest, FirstErrorWinsAndHookRunsOnce) {
  std::atomic<int> hook_calls{0};
  WorkerGroup group([&] { ++hook_calls; });
  group.Start(4, [&](int i) -> Status {
    if (i == 2) return DataLossError("first");
    // The others fail once it has (a fixed sleep lost to a late-started
    // thread on a loaded machine).
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (!group.failed() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(1ms);
    }
    return UnavailableError("later " + std::to_string(i));
  });
  Status s = group.Wait();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "first");
  EXPECT_EQ(hook_calls.load(), 1);
  EXPECT_TRUE(group.failed());
}

TEST(WorkerGroupTest, ConcurrentFailuresKeepExactlyOne) {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> hook_calls{0};
    WorkerGroup group([&] { ++hook_calls; });
    group.Start(8, [](int i) { return InternalError(std::to_string(i)); });
    Status s = group.Wait();
    EXPECT_EQ(s.code(), StatusCode::kInternal);
    EXPECT_EQ(hook_calls.load(), 1);
  }
}

TEST(WorkerGroupTest, HookCancelsOtherStages) {
  BoundedQueue<int> queue(1);
  WorkerGroup group([&] { queue.Cancel(); });
  std::atomic<bool> consumer_ended{false};
  group.Start(2, [&](int i) -> Status {
    if (i == 0) {
      while (queue.Pop()) {
      }
      consumer_ended = true;  // woken by the cancel, not by a Close
      return Status::Ok();
    }
    std::this_thread::sleep_for(20ms);
    return AbortedError("stage failed");
  });
  EXPECT_EQ(group.Wait().code(), StatusCode::kAborted);
  EXPECT_TRUE(consumer_ended.load());
}

TEST(WorkerGroupTest, ExceptionBecomesInternal) {
  std::atomic<int> hook_calls{0};
  WorkerGroup group([&] { ++hook_calls; });
  group.Start(1, [](int) -> Status { throw std::runtime_error("boom"); });
  Status s = group.Wait();
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("boom"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(hook_calls.load(), 1);
}

TEST(WorkerGroupTest, ExternalFailRecordsAndCallsHook) {
  std::atomic<int> hook_calls{0};
  WorkerGroup group([&] { ++hook_calls; });
  group.Fail(FailedPreconditionError("reader: source shrank"));
  group.Fail(InternalError("second"));
  EXPECT_TRUE(group.failed());
  Status s = group.Wait();  // no threads: returns at once
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(hook_calls.load(), 1);
}

TEST(WorkerGroupTest, DestructorJoins) {
  std::atomic<int> finished{0};
  {
    WorkerGroup group;
    group.Start(3, [&](int) {
      std::this_thread::sleep_for(20ms);
      ++finished;
      return Status::Ok();
    });
  }
  EXPECT_EQ(finished.load(), 3);
}

TEST(WorkerGroupTest, NoHookIsFine) {
  WorkerGroup group;
  group.Start(2, [](int i) { return i == 0 ? CancelledError("x") : Status::Ok(); });
  EXPECT_EQ(group.Wait().code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace cairn::pipeline
