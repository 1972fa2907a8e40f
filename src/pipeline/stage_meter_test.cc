#include "pipeline/stage_meter.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace cairn::pipeline {
namespace {

StageSample At(int64_t wall_ns, int64_t cpu_ns, int cores) {
  StageSample s;
  s.wall_ns = wall_ns;
  s.cpu_ns = cpu_ns;
  s.cores = cores;
  return s;
}

constexpr int64_t kSecond = 1'000'000'000;

TEST(StageMeterTest, TheBusiestStageIsTheBottleneck) {
  StageSample from = At(0, 0, 4);
  StageSample to = At(10 * kSecond, 4 * kSecond, 4);  // CPU 10 %
  to.busy_ns[static_cast<int>(Stage::kTargetWrites)] = 9 * kSecond;
  to.busy_ns[static_cast<int>(Stage::kDecode)] = kSecond / 2;
  to.busy_ns[static_cast<int>(Stage::kReadWait)] = 3 * kSecond / 10;
  Bottleneck b = AnalyzeStages(from, to);
  ASSERT_TRUE(b.measured);
  EXPECT_EQ(b.stage, Stage::kTargetWrites);
  EXPECT_FALSE(b.cpu_bound);
  EXPECT_NEAR(b.share[static_cast<int>(Stage::kTargetWrites)], 0.9, 1e-9);
  EXPECT_NEAR(b.cpu_share, 0.1, 1e-9);
  EXPECT_EQ(b.Name(), "target writes");
  EXPECT_EQ(b.Describe(),
            "target writes (target writes busy 90 %, CPU 10 % of 4 cores, reads waited 3 %)");
}

TEST(StageMeterTest, WaitingForReadsNamesTheSource) {
  StageSample to = At(2 * kSecond, kSecond / 5, 2);
  to.busy_ns[static_cast<int>(Stage::kReadWait)] = 19 * kSecond / 10;
  to.busy_ns[static_cast<int>(Stage::kSourceReads)] = 8 * kSecond;  // 4 in flight on average
  to.busy_ns[static_cast<int>(Stage::kDecode)] = kSecond / 20;
  Bottleneck b = AnalyzeStages(At(0, 0, 2), to);
  EXPECT_EQ(b.stage, Stage::kReadWait);
  EXPECT_EQ(b.Name(), "source reads");
  EXPECT_NEAR(b.reads_in_flight, 4.0, 1e-9);
  EXPECT_EQ(b.Describe(),
            "source reads (reads waited 95 %, 4.0 reads in flight, CPU 5 % of 2 cores)");
}

TEST(StageMeterTest, AllCoresBusyNamesTheCpuAndItsBusiestStage) {
  // One core, used all the time; the workers' times are inflated by
  // waiting for it, writes the most.
  StageSample to = At(kSecond, kSecond, 1);
  to.busy_ns[static_cast<int>(Stage::kTargetWrites)] = kSecond / 2;
  to.busy_ns[static_cast<int>(Stage::kDecode)] = 4 * kSecond / 10;
  Bottleneck b = AnalyzeStages(At(0, 0, 1), to);
  EXPECT_TRUE(b.cpu_bound);
  EXPECT_EQ(b.stage, Stage::kDecode);
  EXPECT_EQ(b.Name(), "CPU (decode)");
  EXPECT_EQ(b.Describe(),
            "CPU (decode) (CPU 100 % of 1 core, decode busy 40 %, reads waited 0 %, target "
            "writes 50 %)");
}

TEST(StageMeterTest, QueuingForTheCoresIsCpuBoundToo) {
  // Half a core used, and the workers queued for one longer than they
  // wrote: other processes had it.
  StageSample to = At(kSecond, kSecond / 2, 1);
  to.cpu_wait_ns = 7 * kSecond / 10;
  to.busy_ns[static_cast<int>(Stage::kTargetWrites)] = 6 * kSecond / 10;
  to.busy_ns[static_cast<int>(Stage::kDecode)] = 3 * kSecond / 10;
  Bottleneck b = AnalyzeStages(At(0, 0, 1), to);
  EXPECT_TRUE(b.cpu_bound);
  EXPECT_EQ(b.Name(), "CPU (decode)");
  EXPECT_NEAR(b.other_share, 0.1, 1e-9);
  EXPECT_EQ(b.Describe(),
            "CPU (decode) (CPU 50 % of 1 core, workers queued for a core 70 %, decode busy 30 %, "
            "reads waited 0 %, target writes 60 %)");
  to.cpu_wait_ns = 0;  // the same without the queue: the writes
  EXPECT_EQ(AnalyzeStages(At(0, 0, 1), to).Name(), "target writes");
  // Queued less than they waited for reads: the source, not the CPU.
  to = At(kSecond, 11 * kSecond / 10, 2);  // 55 % + 40 % queued
  to.cpu_wait_ns = 4 * kSecond / 10;
  to.busy_ns[static_cast<int>(Stage::kReadWait)] = 9 * kSecond / 10;
  to.busy_ns[static_cast<int>(Stage::kDecode)] = kSecond / 20;
  EXPECT_EQ(AnalyzeStages(At(0, 0, 2), to).Name(), "source reads");
}

TEST(StageMeterTest, NothingTimedIsNotMeasured) {
  Bottleneck b = AnalyzeStages(At(0, 0, 1), At(kSecond, 0, 1));
  EXPECT_FALSE(b.measured);
  EXPECT_EQ(b.Describe(), "not measured");
}

TEST(StageMeterTest, WorkersCountOnePartEach) {
  StageMeter meter;
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i) {
    workers.emplace_back([&] {
      Lanes lanes(4);
      meter.Add(Stage::kDecode, 400);
    });
  }
  for (auto& t : workers) t.join();
  meter.Add(Stage::kMetadata, 100);  // this thread: one lane
  StageSample s = meter.Sample();
  EXPECT_EQ(s.busy_ns[static_cast<int>(Stage::kDecode)], 400);
  EXPECT_EQ(s.busy_ns[static_cast<int>(Stage::kMetadata)], 100);
  EXPECT_GE(s.cores, 1);
}

TEST(StageMeterTest, TimerWithoutMeterDoesNothing) {
  StageTimer timer(nullptr, Stage::kDecode);  // must not crash or read a clock
  StageMeter meter;
  { StageTimer t(&meter, Stage::kHash); }
  EXPECT_GE(meter.Sample().busy_ns[static_cast<int>(Stage::kHash)], 0);
}

}  // namespace
}  // namespace cairn::pipeline
