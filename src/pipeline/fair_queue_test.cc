#include "pipeline/fair_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace cairn::pipeline {
namespace {

TEST(FairQueueTest, LanesTakeTurnsAndABusyLaneWaits) {
  FairQueue<int> q(/*per_lane_running=*/2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q.Push("heavy", i));
  ASSERT_TRUE(q.Push("light", 100));
  // heavy, light, heavy: the light lane's item does not wait behind the
  // heavy lane's backlog.
  auto a = q.Pop(), b = q.Pop(), c = q.Pop();
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->first, "heavy");
  EXPECT_EQ(b->first, "light");
  EXPECT_EQ(b->second, 100);
  EXPECT_EQ(c->first, "heavy");
  // heavy runs two: a third waits for one of them to be done.
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto d = q.Pop();
    got = true;
    EXPECT_TRUE(d && d->first == "heavy" && d->second == 2);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());  // (a sleep can only make this pass wrongly, never fail it)
  q.Done("heavy");
  t.join();
  EXPECT_TRUE(got.load());
}

TEST(FairQueueTest, CloseDrainsThenEnds) {
  FairQueue<int> q(1);
  ASSERT_TRUE(q.Push("a", 1));
  q.Close();
  EXPECT_FALSE(q.Push("a", 2));
  auto one = q.Pop();
  ASSERT_TRUE(one);
  q.Done("a");
  EXPECT_FALSE(q.Pop());
}

TEST(FairQueueTest, ManyWorkersRunEveryItemOnce) {
  FairQueue<int> q(3);
  std::atomic<int> sum{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (auto item = q.Pop()) {
        sum += item->second;
        q.Done(item->first);
      }
    });
  }
  int expected = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(q.Push("lane" + std::to_string(i % 7), i));
    expected += i;
  }
  q.Close();
  for (auto& t : workers) t.join();
  EXPECT_EQ(sum.load(), expected);
  EXPECT_EQ(q.queued(), 0u);
}

}  // namespace
}  // namespace cairn::pipeline
