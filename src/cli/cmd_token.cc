// cairn token / cairn cert: not yet.
#include "cli/cli_util.h"

namespace cairn::cli {
void RegisterToken(CLI::App&, Context&) {}
void RegisterCert(CLI::App&, Context&) {}
}  // namespace cairn::cli
