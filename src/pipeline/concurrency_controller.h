// ConcurrencyController: how many reads the I/O stage keeps in flight.
//
// Fixed mode returns the pinned number (`--jobs N`). Adaptive mode (the
// default, `--jobs auto`) tunes itself the way TCP tunes its window, on
// measured throughput rather than on a number somebody picked:
//
//   1. Slow start: from the source's suggested starting point, double the
//      limit each measurement window while throughput still grows by ≥ 10%.
//   2. Hill climbing: keep an aged record of the throughput seen at each
//      limit; move to the best one, probe one step above it now and then
//      (and one step below less often), and step back from a limit that
//      brought no gain. A limit whose latency inflated without gain is left.
//   3. Forgetting: a measurement older than 30 windows is dropped, so a
//      change in conditions (a cache that warms up, a link that slows
//      down) is found again by probing.
//   4. Only a binding limit is tuned (as TCP validates its window when the
//      application is the bottleneck, RFC 7661): when reads in flight (their
//      time-weighted mean over the window, by Little's law) stay well below
//      the limit, because the CPU stage or the memory budget is the
//      bottleneck, and the CPU stage did not wait for reads, the limit
//      shrinks to what is used times 1.5, plus two unless reads are instant
//      (under 1.5 in flight on average: then down to one), instead of
//      growing on noise.
//
// A window closes after ≥ window_ns and at least max(4, limit) completions,
// so a 20 ms source is measured over enough reads to mean something.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <algorithm>
#include <map>

#include "base/mutex.h"

namespace cairn::pipeline {

class ConcurrencyController {
 public:
  struct Options {
    bool adaptive = true;
    int initial = 4;   // fixed value when !adaptive
    int min = 1;
    int max = 64;
    int64_t window_ns = 100'000'000;  // 100 ms

    // The options for `--jobs`: 0 = adaptive from `initial_for_source` (the
    // source's suggested start), N = pinned at N. The ceiling is the
    // source's (64 unless it says otherwise; an object store says 128), or N.
    static Options ForJobs(int jobs, int initial_for_source, int max_for_source = 64) {
      Options o;
      o.adaptive = jobs <= 0;
      o.initial = jobs > 0 ? jobs : initial_for_source;
      o.max = std::max(jobs, std::max(max_for_source, o.initial));
      return o;
    }
  };

  explicit ConcurrencyController(const Options& options);

  // Reads the I/O stage may keep in flight now.
  int limit() const { return limit_.load(std::memory_order_relaxed); }
  bool adaptive() const { return options_.adaptive; }

  // Reports one completed read of `bytes` that took `latency_ns`; `now_ns`
  // is a monotonic clock reading. Reads in flight are derived from the
  // latencies (Little's law), so no count needs to be passed.
  void OnComplete(uint64_t bytes, int64_t latency_ns, int64_t now_ns);

  // The consumers of what is read (the CPU stage) report how long each
  // waited for an item: a window in which they waited ≥ 5% of their time
  // was short of reads, so its limit counts as binding even when reads in
  // flight averaged well below it (reads that complete in bursts leave the
  // CPU stage idle between them). `consumers` is how many threads report;
  // until it is set (0) waits are not considered. Only an adaptive
  // controller needs the waits (see adaptive()).
  void SetConsumers(int consumers);
  void OnConsumerWait(int64_t waited_ns);

  struct Summary {
    int final_limit = 0;
    int max_limit = 0;
    double mean_limit = 0;  // time-weighted over closed windows
    int adjustments = 0;
  };
  Summary summary() const;

 private:
  struct Record {
    double throughput = 0;  // bytes per second, aged
    double latency = 0;     // mean ns per read
    int age = 0;            // windows since measured
  };

  void CloseWindow(int64_t now_ns) REQUIRES(mu_);
  int Choose(double throughput, double latency, double mean_in_flight, bool starved)
      REQUIRES(mu_);

  const Options options_;
  std::atomic<int> limit_;

  mutable Mutex mu_;
  int64_t window_start_ns_ GUARDED_BY(mu_) = -1;
  uint64_t window_bytes_ GUARDED_BY(mu_) = 0;
  int64_t window_latency_ns_ GUARDED_BY(mu_) = 0;
  int window_count_ GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> window_wait_ns_{0};  // consumers' waits in the window
  int consumers_ GUARDED_BY(mu_) = 0;
  bool slow_start_ GUARDED_BY(mu_) = true;
  double slow_start_best_ GUARDED_BY(mu_) = 0;
  int windows_ GUARDED_BY(mu_) = 0;
  std::map<int, Record> records_ GUARDED_BY(mu_);
  Summary summary_ GUARDED_BY(mu_);
  double limit_time_sum_ GUARDED_BY(mu_) = 0;
  double time_sum_ GUARDED_BY(mu_) = 0;
};

}  // namespace cairn::pipeline
