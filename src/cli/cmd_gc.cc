#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterGc(CLI::App&, Context&) {}
}  // namespace cairn::cli
