// cairn serve: not yet.
#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterServe(CLI::App&, Context&) {}
}  // namespace cairn::cli
