#include "pipeline/concurrency_controller.h"

#include <algorithm>

namespace cairn::pipeline {
namespace {

constexpr double kGain = 1.10;      // slow start continues while throughput grows this much
constexpr double kBetter = 1.05;    // a limit must beat the best by this much to replace it
constexpr int kForgetAfter = 30;    // windows after which a record is dropped
constexpr int kProbeUpEvery = 3;    // windows between upward probes at the best limit
constexpr int kProbeDownEvery = 8;  // windows between downward probes
constexpr double kBindingShare = 0.6;  // limit binds when reads in flight average ≥ 60% of it
constexpr double kMargin = 1.5;        // headroom kept above reads in flight when not binding
constexpr double kInstantReads = 1.5;  // fewer in flight on average: reads wait for the CPU
constexpr double kStarved = 0.05;      // consumers waiting this share of their time lack reads

}  // namespace

ConcurrencyController::ConcurrencyController(const Options& options)
    : options_(options),
      limit_(std::clamp(options.initial, options.min, options.max)) {
  summary_.final_limit = limit_.load();
  summary_.max_limit = limit_.load();
}

void ConcurrencyController::OnComplete(uint64_t bytes, int64_t latency_ns, int64_t now_ns) {
  if (!options_.adaptive) return;
  MutexLock lock(mu_);
  if (window_start_ns_ < 0) window_start_ns_ = now_ns - latency_ns;
  window_bytes_ += bytes;
  window_latency_ns_ += latency_ns;
  ++window_count_;
  int need = std::max(4, limit_.load(std::memory_order_relaxed));
  // Slow start measures over three mean read latencies (TCP doubles its
  // window every round trip), at least a quarter window: a doubling that
  // binds nearly doubles throughput, which noise does not hide.
  const int64_t span = slow_start_ ? std::clamp(3 * window_latency_ns_ / window_count_,
                                                 options_.window_ns / 4, options_.window_ns)
                                    : options_.window_ns;
  if (now_ns - window_start_ns_ >= span && window_count_ >= need) {
    CloseWindow(now_ns);
  }
}

void ConcurrencyController::SetConsumers(int consumers) {
  MutexLock lock(mu_);
  consumers_ = consumers;
}

void ConcurrencyController::OnConsumerWait(int64_t waited_ns) {
  // An atomic, not mu_: the CPU workers report every item and need not
  // queue behind the I/O threads' reports. A wait that lands in the next
  // window at a boundary changes nothing that matters.
  window_wait_ns_.fetch_add(waited_ns, std::memory_order_relaxed);
}

void ConcurrencyController::CloseWindow(int64_t now_ns) {
  double seconds = static_cast<double>(now_ns - window_start_ns_) / 1e9;
  double throughput = seconds > 0 ? static_cast<double>(window_bytes_) / seconds : 0;
  double latency = static_cast<double>(window_latency_ns_) / window_count_;
  // Little's law: the reads' summed latency over the window's length is the
  // time-weighted mean of reads in flight. (A count sampled as each read
  // completes is biased low when reads finish together: a batch of eight
  // that completes at once samples 8, 7, ..., 1, a mean of 4.5.)
  double mean_in_flight =
      seconds > 0 ? static_cast<double>(window_latency_ns_) / 1e9 / seconds : 0;
  int current = limit_.load(std::memory_order_relaxed);
  limit_time_sum_ += current * seconds;
  time_sum_ += seconds;
  ++windows_;

  const auto waited = static_cast<double>(window_wait_ns_.exchange(0, std::memory_order_relaxed));
  const bool starved =
      consumers_ > 0 && seconds > 0 && waited / 1e9 >= kStarved * seconds * consumers_;
  int next = Choose(throughput, latency, mean_in_flight, starved);
  next = std::clamp(next, options_.min, options_.max);
  if (next != current) {
    ++summary_.adjustments;
    limit_.store(next, std::memory_order_relaxed);
  }
  summary_.final_limit = next;
  summary_.max_limit = std::max(summary_.max_limit, next);
  window_start_ns_ = now_ns;
  window_bytes_ = 0;
  window_latency_ns_ = 0;
  window_count_ = 0;
}

int ConcurrencyController::Choose(double throughput, double latency, double mean_in_flight,
                                  bool starved) {
  int current = limit_.load(std::memory_order_relaxed);
  if (mean_in_flight < kBindingShare * current && !starved) {
    // Not the bottleneck: the measurement says nothing about this limit.
    // Keep a margin above what is used, so growth resumes when it binds.
    // Reads that are done before the next one starts (the page cache) get
    // no extra margin: each idle slot only lets another chunk buffer fill,
    // and on 2 cores a reader running ahead takes CPU from the checks
    // (verify: --jobs 1 beat 3 reads in flight, docs/BENCHMARKS.md). At
    // one read the limit binds, and the climb's probes find out whether a
    // second one pays.
    slow_start_ = false;
    const int used = static_cast<int>(mean_in_flight * kMargin);
    return std::min(current, mean_in_flight < kInstantReads ? std::max(1, used) : used + 2);
  }
  // Forget what is stale. Values are not decayed: a fresh probe compared
  // with a decayed older reading would always look better, and the limit
  // would creep upward without gain.
  for (auto it = records_.begin(); it != records_.end();) {
    if (++it->second.age > kForgetAfter) {
      it = records_.erase(it);
    } else {
      ++it;
    }
  }
  Record& rec = records_[current];
  // A fresh measurement replaces the aged one; repeated ones are smoothed.
  rec.throughput = rec.age == 0 || rec.throughput == 0 ? throughput
                                                       : 0.5 * rec.throughput + 0.5 * throughput;
  rec.latency = latency;
  rec.age = 0;

  if (slow_start_) {
    if (throughput > slow_start_best_ * kGain) {
      slow_start_best_ = std::max(slow_start_best_, throughput);
      if (current < options_.max) return current * 2;
    }
    slow_start_ = false;  // no more gain from doubling: climb around the best
  }

  // The best limit known: highest throughput; among near-equals (within
  // kBetter) the smaller, so a probe upward that brought no gain is undone
  // even though its fresh measurement beats the aged one below it.
  int best = current;
  double best_thr = rec.throughput;
  for (const auto& [lim, r] : records_) {
    if (r.throughput > best_thr * kBetter || (r.throughput >= best_thr / kBetter && lim < best)) {
      best = lim;
      best_thr = r.throughput;
    }
  }
  if (best != current) return best;

  // At the best: probe around it now and then.
  int step = std::max(1, current / 4);
  if (windows_ % kProbeDownEvery == 0 && current > options_.min) return current - step;
  if (windows_ % kProbeUpEvery == 0 && current < options_.max) return current + step;
  return current;
}

ConcurrencyController::Summary ConcurrencyController::summary() const {
  MutexLock lock(mu_);
  Summary s = summary_;
  s.final_limit = limit_.load(std::memory_order_relaxed);
  s.mean_limit = time_sum_ > 0 ? limit_time_sum_ / time_sum_ : s.final_limit;
  return s;
}

}  // namespace cairn::pipeline
