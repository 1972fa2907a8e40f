#include "pipeline/bounded_queue.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn::pipeline {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `pred` holds; false on timeout.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 2000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return pred();
}

TEST(BoundedQueueTest, FifoOrder) {
  BoundedQueue<int> q(10);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.Push(i));
  for (int i = 0; i < 10; ++i) {
    auto v = q.Pop();
    ASSERT_TRUE(v.has_value());
    EXPECT_EQ(*v, i);
  }
}

TEST(BoundedQueueTest, MoveOnlyItems) {
  BoundedQueue<std::unique_ptr<int>> q(2);
  ASSERT_TRUE(q.Push(std::make_unique<int>(7)));
  auto v = q.Pop();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(**v, 7);
}

TEST(BoundedQueueTest, PushBlocksWhileFull) {
  BoundedQueue<int> q(2);
  ASSERT_TRUE(q.Push(1));
  ASSERT_TRUE(q.Push(2));
  std::atomic<bool> pushed{false};
  std::jthread producer([&] {
    EXPECT_TRUE(q.Push(3));
    pushed = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(pushed.load()) << "Push returned although the queue was full";
  EXPECT_EQ(q.Pop(), 1);
  EXPECT_TRUE(Eventually([&] { return pushed.load(); }));
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_EQ(q.Pop(), 3);
}

TEST(BoundedQueueTest, ZeroCapacityMeansOne) {
  BoundedQueue<int> q(0);
  ASSERT_TRUE(q.Push(1));
  std::atomic<bool> pushed{false};
  std::jthread producer([&] {
    q.Push(2);
    pushed = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(pushed.load());
  EXPECT_EQ(q.Pop(), 1);
  EXPECT_EQ(q.Pop(), 2);
}

TEST(BoundedQueueTest, CloseDrainsThenEnds) {
  BoundedQueue<int> q(5);
  ASSERT_TRUE(q.Push(1));
  ASSERT_TRUE(q.Push(2));
  q.Close();
  EXPECT_FALSE(q.Push(3));  // dropped
  EXPECT_EQ(q.Pop(), 1);
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_EQ(q.Pop(), std::nullopt);
  EXPECT_EQ(q.Pop(), std::nullopt);
}

TEST(BoundedQueueTest, CloseWakesBlockedPoppers) {
  BoundedQueue<int> q(1);
  std::atomic<int> ended{0};
  {
    std::vector<std::jthread> consumers;
    for (int i = 0; i < 3; ++i) {
      consumers.emplace_back([&] {
        EXPECT_EQ(q.Pop(), std::nullopt);
        ++ended;
      });
    }
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(ended.load(), 0);
    q.Close();
  }
  EXPECT_EQ(ended.load(), 3);
}

TEST(BoundedQueueTest, CancelDropsItemsAndWakesEveryone) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.Push(1));
  std::atomic<int> pushers_done{0};
  {
    std::vector<std::jthread> pushers;
    for (int i = 0; i < 3; ++i) {
      pushers.emplace_back([&] {
        EXPECT_FALSE(q.Push(2));  // blocked on a full queue, then cancelled
        ++pushers_done;
      });
    }
    std::this_thread::sleep_for(30ms);
    EXPECT_EQ(pushers_done.load(), 0);
    q.Cancel();
  }
  EXPECT_EQ(pushers_done.load(), 3);
  EXPECT_EQ(q.Pop(), std::nullopt);  // the queued item was dropped
  EXPECT_FALSE(q.Push(3));
}

TEST(BoundedQueueTest, CancelWakesBlockedPoppers) {
  BoundedQueue<int> q(4);
  std::atomic<bool> done{false};
  std::jthread consumer([&] {
    EXPECT_EQ(q.Pop(), std::nullopt);
    done = true;
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(done.load());
  q.Cancel();
  EXPECT_TRUE(Eventually([&] { return done.load(); }));
}

TEST(BoundedQueueTest, ManyProducersAndConsumersLoseNothing) {
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr int kPerProducer = 5000;
  BoundedQueue<int> q(8);
  std::atomic<int64_t> sum{0};
  std::atomic<int> count{0};
  {
    std::vector<std::jthread> consumers;
    for (int c = 0; c < kConsumers; ++c) {
      consumers.emplace_back([&] {
        while (auto v = q.Pop()) {
          sum += *v;
          ++count;
        }
      });
    }
    {
      std::vector<std::jthread> producers;
      for (int p = 0; p < kProducers; ++p) {
        producers.emplace_back([&, p] {
          for (int i = 0; i < kPerProducer; ++i) EXPECT_TRUE(q.Push(p * kPerProducer + i));
        });
      }
    }
    q.Close();
  }
  const int64_t n = int64_t{kProducers} * kPerProducer;
  EXPECT_EQ(count.load(), n);
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TEST(BoundedQueueTest, PerProducerOrderIsKept) {
  BoundedQueue<int> q(3);
  std::vector<int> seen;
  {
    std::jthread consumer([&] {
      while (auto v = q.Pop()) seen.push_back(*v);
    });
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(q.Push(i));
    q.Close();
  }
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], i);
}

}  // namespace
}  // namespace cairn::pipeline
