#include "pipeline/buffer_pool.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn::pipeline {
namespace {

TEST(BufferPoolTest, EmptyPoolGivesNewBuffers) {
  BufferPool pool(4);
  Bytes b = pool.Take();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.capacity(), 0u);
}

TEST(BufferPoolTest, GivenBuffersComeBackWithTheirCapacity) {
  BufferPool pool(4);
  Bytes b(1 << 20, 7);
  const uint8_t* data = b.data();
  pool.Give(std::move(b));
  Bytes again = pool.Take();
  EXPECT_EQ(again.data(), data);  // the same allocation
  EXPECT_GE(again.capacity(), 1u << 20);
  EXPECT_TRUE(pool.Take().empty());  // only one was given
}

TEST(BufferPoolTest, KeepsAtMostMaxBuffers) {
  BufferPool pool(2);
  for (int i = 0; i < 5; ++i) pool.Give(Bytes(100, 1));
  int with_capacity = 0;
  for (int i = 0; i < 5; ++i) {
    if (pool.Take().capacity() > 0) ++with_capacity;
  }
  EXPECT_EQ(with_capacity, 2);
}

TEST(BufferPoolTest, BuffersWithoutCapacityAreNotKept) {
  BufferPool pool(4);
  pool.Give(Bytes());
  EXPECT_EQ(pool.Take().capacity(), 0u);
}

TEST(BufferPoolTest, ConcurrentTakeAndGive) {
  BufferPool pool(8);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 2000; ++i) {
          Bytes b = pool.Take();
          b.resize(256);
          b[0] = static_cast<uint8_t>(i);
          pool.Give(std::move(b));
        }
      });
    }
  }
  int kept = 0;
  while (pool.Take().capacity() > 0) ++kept;
  EXPECT_GE(kept, 1);
  EXPECT_LE(kept, 8);
}

}  // namespace
}  // namespace cairn::pipeline
