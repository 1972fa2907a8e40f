#include "pipeline/concurrency_controller.h"

#include <algorithm>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace cairn::pipeline {
namespace {

constexpr uint64_t kBytes = 1 << 20;  // every simulated read returns 1 MiB

// Feeds the controller `completions` reads from a simulated source whose
// throughput at `in_flight` reads is `throughput(in_flight)` bytes/s, on a
// virtual clock. `used(limit)` is how many reads the I/O stage actually
// keeps in flight (the limit itself when the limit binds).
template <typename Throughput, typename Used>
void Simulate(ConcurrencyController& c, int completions, Throughput throughput, Used used,
              int64_t* now_ns) {
  for (int i = 0; i < completions; ++i) {
    int in_flight = std::max(1, used(c.limit()));
    double bps = throughput(in_flight);
    auto dt = static_cast<int64_t>(1e9 * static_cast<double>(kBytes) / bps);
    *now_ns += dt;
    c.OnComplete(kBytes, dt * in_flight, *now_ns);
  }
}

ConcurrencyController::Options Adaptive(int initial) {
  ConcurrencyController::Options o;
  o.adaptive = true;
  o.initial = initial;
  o.min = 1;
  o.max = 64;
  o.window_ns = 100'000'000;
  return o;
}

TEST(ConcurrencyControllerTest, FixedModeNeverMoves) {
  ConcurrencyController::Options o;
  o.adaptive = false;
  o.initial = 7;
  ConcurrencyController c(o);
  EXPECT_FALSE(c.adaptive());
  int64_t now = 0;
  Simulate(c, 5000, [](int n) { return n * 100e6; }, [](int limit) { return limit; }, &now);
  EXPECT_EQ(c.limit(), 7);
  auto s = c.summary();
  EXPECT_EQ(s.final_limit, 7);
  EXPECT_EQ(s.max_limit, 7);
  EXPECT_EQ(s.adjustments, 0);
}

TEST(ConcurrencyControllerTest, InitialIsClamped) {
  auto o = Adaptive(500);
  EXPECT_EQ(ConcurrencyController(o).limit(), 64);
  o.initial = 0;
  EXPECT_EQ(ConcurrencyController(o).limit(), 1);
}

TEST(ConcurrencyControllerTest, GrowsToWhereThroughputStopsGrowing) {
  // Throughput scales with reads in flight up to 16 (an NVMe-like queue),
  // then stays flat.
  ConcurrencyController c(Adaptive(2));
  int64_t now = 0;
  auto source = [](int n) { return std::min(n, 16) * 50e6; };
  Simulate(c, 20000, source, [](int limit) { return limit; }, &now);
  EXPECT_GE(c.limit(), 12);
  EXPECT_LE(c.limit(), 40);
  auto s = c.summary();
  EXPECT_GE(s.max_limit, 16);
  EXPECT_GT(s.adjustments, 0);
  EXPECT_GT(s.mean_limit, 2.0);
}

TEST(ConcurrencyControllerTest, KeepsGrowingWhileThroughputScales) {
  // A WAN or object store: every extra read in flight adds throughput.
  ConcurrencyController c(Adaptive(4));
  int64_t now = 0;
  Simulate(c, 20000, [](int n) { return n * 5e6; }, [](int limit) { return limit; }, &now);
  EXPECT_GE(c.limit(), 48);
}

TEST(ConcurrencyControllerTest, FindsTheKneeAgainAfterConditionsChange) {
  ConcurrencyController c(Adaptive(2));
  int64_t now = 0;
  Simulate(c, 20000, [](int n) { return std::min(n, 8) * 50e6; }, [](int l) { return l; }, &now);
  EXPECT_GE(c.limit(), 8);
  // The source gets faster with more parallelism (e.g. a cache warms up).
  Simulate(c, 40000, [](int n) { return std::min(n, 32) * 50e6; }, [](int l) { return l; },
           &now);
  EXPECT_GE(c.limit(), 24);
}

TEST(ConcurrencyControllerTest, StaysLowWhenMoreReadsDoNotHelp) {
  // A spinning disk: one or two reads in flight are best; more only add latency.
  ConcurrencyController c(Adaptive(8));
  int64_t now = 0;
  auto source = [](int n) { return n <= 2 ? n * 80e6 : 160e6 / (1 + 0.05 * (n - 2)); };
  Simulate(c, 20000, source, [](int limit) { return limit; }, &now);
  EXPECT_LE(c.limit(), 6);
}

TEST(ConcurrencyControllerTest, ShrinksWhenTheLimitDoesNotBind) {
  // The CPU stage is the bottleneck: only one read is ever in flight.
  ConcurrencyController c(Adaptive(32));
  int64_t now = 0;
  Simulate(c, 2000, [](int) { return 100e6; }, [](int) { return 1; }, &now);
  EXPECT_LE(c.limit(), 2);  // one read, or a probe of a second
}

TEST(ConcurrencyControllerTest, SlowReadsThatDoNotBindKeepAMargin) {
  // Reads take long (a remote store) but the CPU stage caps them at five in
  // flight: the limit shrinks, yet keeps two above 1.5 x what is used, so a
  // faster CPU stage finds room at once.
  ConcurrencyController c(Adaptive(32));
  int64_t now = 0;
  Simulate(c, 2000, [](int) { return 100e6; }, [](int) { return 5; }, &now);
  EXPECT_EQ(c.limit(), 9);
}

TEST(ConcurrencyControllerTest, ReadsThatCompleteTogetherCountAsInFlight) {
  // A 20 ms source whose reads start together and complete together, and
  // whose throughput grows with reads in flight. Sampled as each completes,
  // a batch of eight looked like 4.5 in flight (8, 7, ..., 1), under 60% of
  // the limit, and the limit stopped growing; by the time they spent in
  // flight (Little's law) they are eight.
  ConcurrencyController c(Adaptive(8));
  int64_t now = 0;
  for (int batch = 0; batch < 200; ++batch) {
    now += 20'000'000;
    const int n = c.limit();
    for (int i = 0; i < n; ++i) c.OnComplete(kBytes, 20'000'000, now);
  }
  EXPECT_GE(c.limit(), 32);
}

TEST(ConcurrencyControllerTest, ConsumersWaitingForReadsMakeTheLimitBind) {
  // Reads average half the limit in flight (they arrive in bursts), and up
  // to 24 more of them bring more throughput while two consumers wait for
  // them: the CPU stage is short of reads, so the limit must grow, not
  // shrink to what is used.
  auto run = [](bool report_waits) {
    ConcurrencyController c(Adaptive(8));
    c.SetConsumers(2);
    int64_t now = 0;
    for (int i = 0; i < 20000; ++i) {
      const int limit = c.limit();
      const int used = std::max(1, limit / 2);
      const double busy = std::min(limit, 24) / 24.0;  // consumers' busy share
      const auto dt = static_cast<int64_t>(1'000'000 / busy);  // 1 MiB per ms at best
      now += dt;
      c.OnComplete(kBytes, dt * used, now);
      if (report_waits) c.OnConsumerWait(static_cast<int64_t>(2 * dt * (1 - busy)));
    }
    return c.limit();
  };
  EXPECT_GE(run(true), 16);
  EXPECT_LE(run(false), 10);  // not starved: shrinks to 1.5 x used + 2
}

// A 20 ms source feeding a CPU stage that takes 1000 MiB/s: twenty reads
// in flight keep it busy; fewer leave the two consumers waiting. Every
// 100 ms the machine's other tenants change how fast everything runs (a
// factor from 0.6 to 1.4, as on a shared 2-vCPU VM), so the throughput of
// one window says little. Returns the share of the CPU stage's capacity
// used over `seconds`, and the limit's time-weighted mean in `*mean`.
double NoisyStarvedRun(ConcurrencyController& c, bool thrashing, double seconds, double* mean) {
  c.SetConsumers(2);
  constexpr double kCpu = 1000.0 * kBytes;  // bytes per second
  int64_t now = 0;
  uint64_t lcg = 12345;
  double noise = 1.0, used = 0, limit_sum = 0;
  int64_t next_change = 0;
  const auto end = static_cast<int64_t>(seconds * 1e9);
  while (now < end) {
    if (now >= next_change) {
      lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
      noise = 0.6 + 0.8 * static_cast<double>(lcg >> 11) / static_cast<double>(1ULL << 53);
      next_change += 100'000'000;
    }
    const int n = c.limit();
    // A disk that thrashes: past two reads each one queues behind the rest.
    const double latency = thrashing ? 0.020 * std::max(1.0, n / 2.0) : 0.020;
    const double offered = std::min(n, thrashing ? 2 : n) * kBytes / 0.020;
    const double rate = std::min(offered, kCpu);  // bytes per second
    const double wait = 1 - rate / kCpu;          // consumers' idle share
    const auto dt = static_cast<int64_t>(1e9 * kBytes / (rate * noise));
    now += dt;
    used += static_cast<double>(dt) * rate / kCpu;
    limit_sum += static_cast<double>(dt) * n;
    c.OnComplete(kBytes, static_cast<int64_t>(latency * 1e9 / noise), now);
    c.OnConsumerWait(static_cast<int64_t>(2 * static_cast<double>(dt) * wait));
  }
  *mean = limit_sum / static_cast<double>(now);
  return used / static_cast<double>(now);
}

TEST(ConcurrencyControllerTest, ConsumersShortOfReadsGetThemDespiteNoisyThroughput) {
  // Throughput that jumps by ±40 % from one window to the next must not
  // strand the limit below what the CPU stage needs (the climb keeps a
  // limit only for a 5 % gain, which the noise can hide). Measured: the
  // stage is 98 % used, the limit 26 on average.
  ConcurrencyController c(Adaptive(2));
  double mean = 0;
  const double used = NoisyStarvedRun(c, false, 30, &mean);
  EXPECT_GE(used, 0.85) << "mean limit " << mean;
  EXPECT_GE(mean, 16) << "CPU stage used " << used;
}

TEST(ConcurrencyControllerTest, WaitsDoNotPushReadsIntoADiskThatQueues) {
  // The same waits and noise, but reads past two only queue at the source
  // (latency grows with them, throughput does not): waiting consumers must
  // not push the limit up. Measured: 6.7 on average. (A Little's-law jump
  // sized by the waits, tried on 2026-12-02, failed here with 36: the noisy
  // records let it creep from one "best" limit to the next.)
  ConcurrencyController c(Adaptive(2));
  double mean = 0;
  NoisyStarvedRun(c, true, 30, &mean);
  EXPECT_LE(mean, 8) << "limit " << c.limit();
}

TEST(ConcurrencyControllerTest, WindowNeedsEnoughTimeAndReads) {
  ConcurrencyController c(Adaptive(4));
  // Many reads, but all within 1 ms: no window closes, nothing changes.
  for (int i = 0; i < 1000; ++i) c.OnComplete(kBytes, 1000, 1'000'000 + i);
  EXPECT_EQ(c.limit(), 4);
  EXPECT_EQ(c.summary().adjustments, 0);
}

TEST(ConcurrencyControllerTest, ConcurrentReportsAreSafe) {
  ConcurrencyController c(Adaptive(4));
  std::atomic<int64_t> clock{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 5000; ++i) {
          int64_t now = clock.fetch_add(1'000'000) + 1'000'000;
          c.OnComplete(kBytes, 1'000'000, now);
          (void)c.summary();
        }
      });
    }
  }
  EXPECT_GE(c.limit(), 1);
  EXPECT_LE(c.limit(), 64);
}

}  // namespace
}  // namespace cairn::pipeline

namespace cairn::pipeline {
namespace {

TEST(ConcurrencyControllerTest, JobsOptionsTakeTheSourcesCeiling) {
  using O = ConcurrencyController::Options;
  EXPECT_TRUE(O::ForJobs(0, 32, 128).adaptive);
  EXPECT_EQ(O::ForJobs(0, 32, 128).initial, 32);
  EXPECT_EQ(O::ForJobs(0, 32, 128).max, 128);
  EXPECT_EQ(O::ForJobs(0, 4).max, 64);
  EXPECT_FALSE(O::ForJobs(8, 32, 128).adaptive);
  EXPECT_EQ(O::ForJobs(8, 32, 128).initial, 8);
  EXPECT_EQ(O::ForJobs(200, 4).max, 200);
}

}  // namespace
}  // namespace cairn::pipeline
