#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterStatus(CLI::App&, Context&) {}
}  // namespace cairn::cli
