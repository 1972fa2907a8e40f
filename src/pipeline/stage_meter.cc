#include "pipeline/stage_meter.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include <time.h>

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace cairn::pipeline {
namespace {

thread_local int t_lanes = 1;

// The process's CPU time: what all its threads used, user and system.
int64_t ProcessCpuNanos() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto ns = [](const timeval& tv) {
    return int64_t{tv.tv_sec} * 1'000'000'000 + int64_t{tv.tv_usec} * 1000;
  };
  return ns(ru.ru_utime) + ns(ru.ru_stime);
}

// CPUs the affinity mask allows (`taskset -c 0`: one).
int AllowedCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// The calling thread's run queue delay (ns), the second field of
// /proc/thread-self/schedstat; -1 when there is none.
int64_t ThreadRunDelayNanos() {
  int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[128];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoll(buf, &end, 10);  // time on a CPU
  if (end == buf) return -1;
  char* p = end;
  const long long wait = std::strtoll(p, &end, 10);
  return end == p ? -1 : static_cast<int64_t>(wait);
}

// The calling thread's CPU time (ns).
int64_t ThreadCpuNanos() {
  timespec ts;
  if (::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

int Percent(double share) { return static_cast<int>(share * 100 + 0.5); }

// Stages that can be the bottleneck. Source reads stand for themselves by
// the time the CPU workers waited for them (kReadWait): reads summed over
// many in flight say how deep the queue was, not whether it held the run up.
constexpr Stage kCandidates[] = {Stage::kReadWait, Stage::kDecode,       Stage::kHash,
                                 Stage::kCompress, Stage::kTargetWrites, Stage::kMetadata};

}  // namespace

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kSourceReads: return "source reads";
    case Stage::kReadWait: return "source reads";  // the workers' view of them
    case Stage::kDecode: return "decode";
    case Stage::kHash: return "hash";
    case Stage::kCompress: return "compress";
    case Stage::kTargetWrites: return "target writes";
    case Stage::kMetadata: return "metadata";
  }
  return "?";
}

const char* StageKey(Stage stage) {
  switch (stage) {
    case Stage::kSourceReads: return "source_reads";
    case Stage::kReadWait: return "read_wait";
    case Stage::kDecode: return "decode";
    case Stage::kHash: return "hash";
    case Stage::kCompress: return "compress";
    case Stage::kTargetWrites: return "target_writes";
    case Stage::kMetadata: return "metadata";
  }
  return "?";
}

bool IsCpuStage(Stage stage) {
  return stage == Stage::kDecode || stage == Stage::kHash || stage == Stage::kCompress;
}

int64_t StageMeter::NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

StageMeter::StageMeter() { start_ = Sample(); }

void StageMeter::AddCpuWait(int64_t ns) {
  if (ns > 0) cpu_wait_ns_.fetch_add(ns / t_lanes, std::memory_order_relaxed);
}

CpuWaitScope::CpuWaitScope(StageMeter* meter) : meter_(meter) {
  if (meter_ != nullptr) start_ = ThreadRunDelayNanos();
}

CpuWaitScope::~CpuWaitScope() {
  if (meter_ == nullptr || start_ < 0) return;
  const int64_t end = ThreadRunDelayNanos();
  if (end >= start_) meter_->AddCpuWait(end - start_);
}

void StageMeter::Add(Stage stage, int64_t ns) {
  if (ns <= 0) return;
  busy_ns_[static_cast<int>(stage)].fetch_add(ns / t_lanes, std::memory_order_relaxed);
}

StageSample StageMeter::Sample() const {
  StageSample s;
  s.wall_ns = NowNanos();
  s.cpu_ns = ProcessCpuNanos();
  s.cpu_wait_ns = cpu_wait_ns_.load(std::memory_order_relaxed);
  s.cores = AllowedCores();
  for (int i = 0; i < kStageCount; ++i) s.busy_ns[i] = busy_ns_[i].load(std::memory_order_relaxed);
  return s;
}

SplitTimer::SplitTimer(StageMeter* meter, Stage cpu_stage, Stage blocked_stage)
    : meter_(meter), cpu_stage_(cpu_stage), blocked_stage_(blocked_stage) {
  if (meter_ == nullptr) return;
  queued_ = ThreadRunDelayNanos();
  cpu_ = ThreadCpuNanos();
  wall_ = StageMeter::NowNanos();
}

SplitTimer::~SplitTimer() {
  if (meter_ == nullptr) return;
  const int64_t wall = StageMeter::NowNanos() - wall_;
  const int64_t cpu = ThreadCpuNanos() - cpu_;
  const int64_t end_queued = queued_ >= 0 ? ThreadRunDelayNanos() : -1;
  const int64_t queued = end_queued >= queued_ ? end_queued - queued_ : 0;
  const int64_t blocked = wall - cpu - queued;
  meter_->Add(cpu_stage_, cpu);
  meter_->AddCpuWait(queued);
  meter_->Add(blocked_stage_, blocked);
  // Blocked reading: also the reads themselves, summed over the threads
  // (not divided by the lanes), as the fetch pipeline's I/O stage adds
  // them, so the line's "reads in flight" is their mean here too.
  if (blocked_stage_ == Stage::kReadWait) meter_->Add(Stage::kSourceReads, blocked * t_lanes);
}

Lanes::Lanes(int lanes) : previous_(t_lanes) { t_lanes = std::max(1, lanes); }
Lanes::~Lanes() { t_lanes = previous_; }

Bottleneck AnalyzeStages(const StageSample& from, const StageSample& to) {
  Bottleneck b;
  const int64_t wall = to.wall_ns - from.wall_ns;
  if (wall <= 0) return b;
  b.seconds = static_cast<double>(wall) / 1e9;
  b.cores = to.cores;
  const double capacity = static_cast<double>(wall) * b.cores;
  b.cpu_share = static_cast<double>(to.cpu_ns - from.cpu_ns) / capacity;
  b.cpu_wait_share = static_cast<double>(to.cpu_wait_ns - from.cpu_wait_ns) / static_cast<double>(wall);
  for (int i = 0; i < kStageCount; ++i) {
    b.share[i] = static_cast<double>(std::max<int64_t>(0, to.busy_ns[i] - from.busy_ns[i])) / wall;
  }
  b.reads_in_flight = b.share[static_cast<int>(Stage::kSourceReads)];
  double best = 0;
  for (Stage s : kCandidates) {
    if (b.share[static_cast<int>(s)] > best) {
      best = b.share[static_cast<int>(s)];
      b.stage = s;
    }
  }
  b.measured = best > 0;
  double accounted = 0;
  for (Stage s : kCandidates) accounted += b.share[static_cast<int>(s)];
  b.other_share = std::max(0.0, 1 - accounted);
  // A process that used all its cores is limited by them, whichever stage
  // its threads were in (a worker "in" a write or a wait is then often only
  // waiting for the core): name the busiest CPU stage. So is one whose
  // workers spent the rest of their time queued for a core (other processes
  // had them), unless a stage that is not the CPU's held them longer (queue
  // delay after a wake-up overlaps the stage the worker woke in: the read
  // wait of a slow source must not read as CPU on a loaded machine).
  const double top = b.share[static_cast<int>(b.stage)];
  const bool queued = b.cpu_share + b.cpu_wait_share >= 0.9 &&
                      (IsCpuStage(b.stage) || b.cpu_wait_share >= top);
  if (b.measured && (b.cpu_share >= 0.9 || queued)) {
    b.cpu_bound = true;
    double cpu_best = -1;
    for (Stage s : {Stage::kDecode, Stage::kHash, Stage::kCompress}) {
      if (b.share[static_cast<int>(s)] > cpu_best) {
        cpu_best = b.share[static_cast<int>(s)];
        b.stage = s;
      }
    }
  }
  return b;
}

std::string Bottleneck::Name() const {
  if (!measured) return "not measured";
  if (cpu_bound) return fmt::format("CPU ({})", StageName(stage));
  return StageName(stage);
}

std::string Bottleneck::Describe() const {
  if (!measured) return "not measured";
  auto pct = [&](Stage s) { return Percent(share[static_cast<int>(s)]); };
  std::string cpu = fmt::format("CPU {} % of {} core{}", Percent(cpu_share), cores,
                                cores == 1 ? "" : "s");
  if (Percent(cpu_wait_share) >= 5) {
    cpu += fmt::format(", workers queued for a core {} %", Percent(cpu_wait_share));
  }
  std::string parts;
  if (stage == Stage::kReadWait) {
    parts = fmt::format("reads waited {} %, {:.1f} reads in flight, {}", pct(Stage::kReadWait),
                        reads_in_flight, cpu);
  } else {
    parts = cpu_bound ? fmt::format("{}, {} busy {} %", cpu, StageName(stage), pct(stage))
                      : fmt::format("{} busy {} %, {}", StageName(stage), pct(stage), cpu);
    parts += fmt::format(", reads waited {} %", pct(Stage::kReadWait));
  }
  if (stage != Stage::kTargetWrites && pct(Stage::kTargetWrites) >= 5) {
    parts += fmt::format(", target writes {} %", pct(Stage::kTargetWrites));
  }
  return fmt::format("{} ({})", Name(), parts);
}

}  // namespace cairn::pipeline
