#include "cli/access_options.h"

#include <fmt/format.h>

#include "access/chunk_cache.h"
#include "base/bytes.h"
#include "cli/cli_util.h"

namespace cairn::cli {

void AddAccessOptions(CLI::App* cmd, AccessOptions* options) {
  cmd->add_option("--cache", options->cache,
                  "decoded chunks kept in memory (default 256M, at least 16M); memory stays "
                  "within it whatever the archive size");
  cmd->add_option("--jobs", options->jobs,
                  "reads in flight when reading ahead: auto (self-tuning, default) or N");
}

Result<AccessSettings> ParseAccessOptions(const AccessOptions& options) {
  AccessSettings s;
  CAIRN_ASSIGN_OR_RETURN(s.cache_bytes, ParseByteSize(options.cache));
  if (s.cache_bytes < access::ChunkCache::kMinCapacity) {
    return InvalidArgumentError(fmt::format(
        "--cache {} is below the 16M minimum (a chunk is up to 16 MiB)", options.cache));
  }
  CAIRN_ASSIGN_OR_RETURN(s.jobs, ParseJobs(options.jobs));
  return s;
}

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace cairn::cli
