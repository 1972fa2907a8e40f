#include "base/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace cairn {
namespace {

using std::chrono::milliseconds;
using Clock = RateLimiter::Clock;

double Secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

TEST(RateLimiterTest, AFullBucketLetsTheBurstThroughThenChargesTheRate) {
  RateLimiter limiter(1000, 100);
  const auto t0 = Clock::now();
  EXPECT_EQ(limiter.Reserve(100, t0), Clock::duration::zero());
  // 500 more bytes at once: a debt of 500 at 1000 B/s.
  EXPECT_NEAR(Secs(limiter.Reserve(500, t0)), 0.5, 1e-6);
  // Half a second later the debt is paid; 250 more wait a quarter second.
  EXPECT_NEAR(Secs(limiter.Reserve(250, t0 + milliseconds(500))), 0.25, 1e-6);
  EXPECT_EQ(limiter.total(), 850u);
}

TEST(RateLimiterTest, IdleTimeRefillsNoMoreThanTheBurst) {
  RateLimiter limiter(1000, 100);
  const auto t0 = Clock::now();
  (void)limiter.Reserve(100, t0);
  // An hour idle gives back the burst, not an hour of credit.
  EXPECT_NEAR(Secs(limiter.Reserve(1100, t0 + std::chrono::hours(1))), 1.0, 1e-6);
}

TEST(RateLimiterTest, ATransferNeverFinishesBeforeItsBytesAllow) {
  // Many small acquisitions from the clock: N bytes take at least
  // (N - burst) / rate.
  RateLimiter limiter(4 << 20, 64 << 10);  // 4 MiB/s
  const auto t0 = Clock::now();
  for (int i = 0; i < 32; ++i) limiter.Acquire(32 << 10);  // 1 MiB
  const double elapsed = Secs(Clock::now() - t0);
  EXPECT_GE(elapsed, (1.0 * (1 << 20) - (64 << 10)) / (4 << 20));
}

TEST(RateLimiterTest, ThreadsSharingALimiterShareItsRate) {
  // Eight connections of one run charge one bucket: together, not each, they
  // move at most the rate. 8 x 128 KiB at 4 MiB/s take at least
  // (1 MiB - burst) / rate; eight buckets would let them through in ~0 s.
  RateLimiter limiter(4 << 20, 64 << 10);
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&limiter] {
      for (int i = 0; i < 16; ++i) limiter.Acquire(8 << 10);
    });
  }
  for (auto& t : threads) t.join();
  const double elapsed = Secs(Clock::now() - t0);
  EXPECT_GE(elapsed, (1.0 * (1 << 20) - (64 << 10)) / (4 << 20));
  EXPECT_EQ(limiter.total(), 1u << 20);
}

TEST(RateLimiterTest, DefaultBurstIsAnEighthOfASecondAtLeast64KiB) {
  EXPECT_EQ(RateLimiter(8 << 20).burst(), 1u << 20);
  EXPECT_EQ(RateLimiter(1000).burst(), 64u << 10);
}

TEST(RateLimiterTest, ParsesRatesWithBinarySuffixes) {
  EXPECT_EQ(*ParseByteRate("1048576", "--limit-upload"), 1048576u);
  EXPECT_EQ(*ParseByteRate("500K", "--limit-upload"), 500u << 10);
  EXPECT_EQ(*ParseByteRate("20M", "--limit-upload"), 20u << 20);
  EXPECT_EQ(*ParseByteRate("20MiB", "--limit-upload"), 20u << 20);
  EXPECT_EQ(*ParseByteRate("4m/s", "--limit-upload"), 4u << 20);
  EXPECT_EQ(*ParseByteRate("1.5G", "--limit-upload"), 3ull << 29);
  for (const char* bad : {"", "fast", "-1M", "0", "10X", "M", "1e400", "nan"}) {
    auto r = ParseByteRate(bad, "--limit-download");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("--limit-download"), std::string_view::npos);
  }
}

}  // namespace
}  // namespace cairn
