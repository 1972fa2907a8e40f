// Options shared by the instant-access verbs (`mount`, `nbd`, `restore
// --instant`): the chunk cache's size and reads in flight, and the signal
// handling of a command that serves until it is stopped.
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"

namespace cairn::cli {

struct AccessOptions {
  std::string cache = "256M";  // --cache SIZE
  std::string jobs = "auto";   // --jobs auto|N (readahead's reads in flight)
};

struct AccessSettings {
  uint64_t cache_bytes = 0;
  int jobs = 0;  // 0: adaptive
};

void AddAccessOptions(CLI::App* cmd, AccessOptions* options);
// InvalidArgument for a size below 16M or a bad --jobs.
Result<AccessSettings> ParseAccessOptions(const AccessOptions& options);

// Blocks SIGINT and SIGTERM in the calling thread (and so in every thread
// it starts afterwards) and returns the set, for sigwait.
sigset_t BlockStopSignals();

}  // namespace cairn::cli
