// Progress: counters a long operation (restore, verify) updates from its
// pipeline threads and a display (cli/progress_bar.h) reads. Plain atomics:
// the display samples them a few times a second and never blocks the work.
// `stages` is where the time went (pipeline/stage_meter.h): the summary's
// bottleneck, and the progress bar's current one.
#pragma once

#include <atomic>
#include <cstdint>

#include "pipeline/stage_meter.h"

namespace cairn::pipeline {

struct Progress {
  // What is being done now, a string literal ("scan", "restore", "rehearse").
  std::atomic<const char*> phase{""};
  std::atomic<uint64_t> total_bytes{0};  // of the current phase
  std::atomic<uint64_t> done_bytes{0};
  std::atomic<int> reads_limit{0};  // reads in flight the controller allows now
  StageMeter stages;  // its clock starts with the Progress

  void StartPhase(const char* name, uint64_t total) {
    done_bytes.store(0, std::memory_order_relaxed);
    total_bytes.store(total, std::memory_order_relaxed);
    phase.store(name, std::memory_order_release);
  }
  void Add(uint64_t bytes) { done_bytes.fetch_add(bytes, std::memory_order_relaxed); }
};

// The meter of an optional Progress (null: nothing is timed).
inline StageMeter* MeterOf(Progress* progress) {
  return progress != nullptr ? &progress->stages : nullptr;
}

}  // namespace cairn::pipeline
