// StageMeter: where the time of a restore, verify or backup went, so that
// every run can name what limited it (its bottleneck).
//
// Each stage of a pipeline adds the time it was busy: the fetch pipeline
// itself times its I/O stage (source reads) and how long its CPU workers
// waited for a read; the flows time their own parts of the CPU stage
// (decode, hash, compress, target writes, metadata) with a StageTimer.
// Time is added as *wall-equivalent* time: a thread that is one of N
// workers of a pipeline (a Lanes scope) adds 1/N of what it spent, so a
// stage that kept every worker busy for the whole run adds the run's wall
// time, and work done on the caller's thread alone (the final fsync, the
// tree's metadata) adds all of it. A stage's share is its wall-equivalent
// time over the run's wall time; the bottleneck is the stage with the
// largest share, or the CPU as a whole when the process used (nearly) all
// the cores it may run on (its CPU time from getrusage over wall × the CPUs
// of its affinity mask: `taskset -c 0` counts one core) or its CPU workers
// spent the rest of their time queued for a core (other processes had the
// cores: the run queue delay of /proc/thread-self/schedstat, read as each
// worker starts and ends, a share of the workers' time like a stage's).
//
// Cost: a clock read at each end of a timed stretch (two per chunk and
// stage, tens of nanoseconds against a 4 MiB chunk's milliseconds) and one
// relaxed atomic add; no lock, nothing per byte.
//
// Thread safety: Add and Sample from any thread, concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace cairn::pipeline {

enum class Stage : int {
  kSourceReads = 0,  // the I/O stage's reads (summed over reads in flight)
  kReadWait,         // CPU workers idle: no read had arrived yet
  kDecode,           // CRC, decryption, decompression, SHA-256 check
  kHash,             // backup: zero test and SHA-256 of the source data (trees: and the
                     // chunker's rolling hash that finds cuts)
  kCompress,         // backup: zstd and encryption
  kTargetWrites,     // restore: the target's writes and sync; backup: chunk inserts
  kMetadata,         // ledger, index and tree metadata, store lookups
};
inline constexpr int kStageCount = 7;

// "source reads", "decode", … (the words of the summary line).
const char* StageName(Stage stage);
// "source_reads", "read_wait", … (JSON keys and metric labels).
const char* StageKey(Stage stage);
// Decode, hash and compress: the stages the cores do.
bool IsCpuStage(Stage stage);

// The counters at one moment.
struct StageSample {
  int64_t wall_ns = 0;      // monotonic clock
  int64_t cpu_ns = 0;       // the process's user + system CPU time
  int64_t cpu_wait_ns = 0;  // CPU workers runnable, queued for a core (wall-equivalent)
  int cores = 1;            // CPUs this process may run on
  std::array<int64_t, kStageCount> busy_ns{};  // wall-equivalent (source reads: summed)
};

// What limited a stretch of a run (between two samples).
struct Bottleneck {
  bool measured = false;  // some stage was timed
  Stage stage = Stage::kReadWait;
  bool cpu_bound = false;  // CPU share + workers' queue share ≥ 90 %
  double seconds = 0;      // wall time of the stretch
  std::array<double, kStageCount> share{};  // of the wall time (source reads: see below)
  double cpu_share = 0;    // CPU time / (wall × cores)
  double cpu_wait_share = 0;  // of the workers' time, queued for a core
  // Wall time no stage accounts for: setup, planning, the pipeline's own
  // hand-offs.
  double other_share = 0;
  int cores = 1;
  double reads_in_flight = 0;  // mean reads in flight (Little's law)

  // "source reads", "target writes", "CPU (decode)".
  std::string Name() const;
  // "target writes (target writes 97 %, CPU 41 % of 2 cores, reads waited 3 %)".
  std::string Describe() const;
};

// Compares two samples of one meter (`to` taken after `from`).
Bottleneck AnalyzeStages(const StageSample& from, const StageSample& to);

class StageMeter {
 public:
  StageMeter();  // the run starts now

  // Adds `ns` the calling thread spent in `stage`, divided by its lanes.
  void Add(Stage stage, int64_t ns);
  // Adds time the calling worker queued for a core (CpuWaitScope),
  // divided by its lanes.
  void AddCpuWait(int64_t ns);
  StageSample Sample() const;
  const StageSample& start() const { return start_; }
  // From the start until now.
  Bottleneck Analyze() const { return AnalyzeStages(start_, Sample()); }

  static int64_t NowNanos();

 private:
  StageSample start_;
  std::array<std::atomic<int64_t>, kStageCount> busy_ns_{};
  std::atomic<int64_t> cpu_wait_ns_{0};
};

// While alive on a CPU worker: the thread's run queue delay goes to
// `meter` (null: nothing read). Two reads of /proc/thread-self/schedstat
// per worker and pipeline run; nothing when the kernel has no schedstat.
class CpuWaitScope {
 public:
  explicit CpuWaitScope(StageMeter* meter);
  ~CpuWaitScope();
  CpuWaitScope(const CpuWaitScope&) = delete;
  CpuWaitScope& operator=(const CpuWaitScope&) = delete;

 private:
  StageMeter* meter_;
  int64_t start_ = -1;
};

// While alive, the calling thread is one of `lanes` threads doing the same
// work (a pipeline's CPU workers): its stage times count 1/lanes each.
class Lanes {
 public:
  explicit Lanes(int lanes);
  ~Lanes();
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;

 private:
  int previous_;
};

// Times the scope into `meter` (null: does nothing, reads no clock).
class StageTimer {
 public:
  StageTimer(StageMeter* meter, Stage stage)
      : meter_(meter), stage_(stage), start_(meter != nullptr ? StageMeter::NowNanos() : 0) {}
  ~StageTimer() {
    if (meter_ != nullptr) meter_->Add(stage_, StageMeter::NowNanos() - start_);
  }
  StageTimer(const StageTimer&) = delete;
  StageTimer& operator=(const StageTimer&) = delete;

 private:
  StageMeter* meter_;
  Stage stage_;
  int64_t start_;
};

// Times the scope into `meter` (null: does nothing) for a thread that does
// its own blocking reads between stretches of CPU work (gc's mark reads
// and decodes each index on the same thread): the thread's CPU time goes
// to `cpu_stage`, the time it queued for a core to the meter's CPU wait,
// and the rest of the wall time — blocked in the kernel, i.e. reading — to
// `blocked_stage`. Costs a clock read and a read of
// /proc/thread-self/schedstat at each end: for stretches of milliseconds
// (one index), not per chunk.
class SplitTimer {
 public:
  SplitTimer(StageMeter* meter, Stage cpu_stage, Stage blocked_stage);
  ~SplitTimer();
  SplitTimer(const SplitTimer&) = delete;
  SplitTimer& operator=(const SplitTimer&) = delete;

 private:
  StageMeter* meter_;
  Stage cpu_stage_, blocked_stage_;
  int64_t wall_ = 0, cpu_ = 0, queued_ = -1;
};

}  // namespace cairn::pipeline
