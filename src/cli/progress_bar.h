// ProgressBar: draws a pipeline::Progress on a terminal a few times a
// second (phase, bytes done of total, percent, MiB/s over the last seconds,
// ETA, reads in flight, and the bottleneck of the last seconds from the
// Progress's stage meter) on one line of stderr, and erases it when done.
// When stderr is not a terminal it draws nothing, so logs and pipes stay
// clean. Our own few lines rather than a library: Debian 12 packages no
// progress-bar library for C++ (indicators is not packaged).
#pragma once

#include <cstdio>
#include <string>
#include <thread>

#include "base/mutex.h"
#include "pipeline/progress.h"

namespace cairn::cli {

class ProgressBar {
 public:
  // Draws `progress` on `out` while alive; `enabled` false draws nothing.
  ProgressBar(const pipeline::Progress& progress, FILE* out, bool enabled);
  ~ProgressBar();  // stops and erases the line
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // True when stderr is a terminal (and TERM is not "dumb").
  static bool StderrIsTerminal();

  // The line for a snapshot of the counters (exposed for tests).
  // `bottleneck`: the stage's name, or empty.
  static std::string Render(const char* phase, uint64_t done, uint64_t total, double bytes_per_s,
                            int reads_limit, const std::string& bottleneck = "");

 private:
  void Loop();

  const pipeline::Progress& progress_;
  FILE* out_;
  Mutex mu_;
  CondVar cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cairn::cli
