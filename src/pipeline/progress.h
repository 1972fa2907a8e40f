// Progress: counters a long operation (restore, verify) updates from its
// pipeline threads and a display (cli/progress_bar.h) reads. Plain atomics:
// the display samples them a few times a second and never blocks the work.
#pragma once

#include <atomic>
#include <cstdint>

namespace cairn::pipeline {

struct Progress {
  // What is being done now, a string literal ("scan", "restore", "rehearse").
  std::atomic<const char*> phase{""};
  std::atomic<uint64_t> total_bytes{0};  // of the current phase
  std::atomic<uint64_t> done_bytes{0};
  std::atomic<int> reads_limit{0};  // reads in flight the controller allows now

  void StartPhase(const char* name, uint64_t total) {
    done_bytes.store(0, std::memory_order_relaxed);
    total_bytes.store(total, std::memory_order_relaxed);
    phase.store(name, std::memory_order_release);
  }
  void Add(uint64_t bytes) { done_bytes.fetch_add(bytes, std::memory_order_relaxed); }
};

}  // namespace cairn::pipeline
