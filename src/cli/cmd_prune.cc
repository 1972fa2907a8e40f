#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterPrune(CLI::App&, Context&) {}
}  // namespace cairn::cli
