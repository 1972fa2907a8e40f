#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterBenchmark(CLI::App&, Context&) {}
}  // namespace cairn::cli
