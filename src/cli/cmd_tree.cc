// cairn ls / cairn cat: read a tree archive without restoring it.
#include "cli/cli_util.h"

namespace cairn::cli {

void RegisterTree(CLI::App& /*app*/, Context& /*ctx*/) {}

}  // namespace cairn::cli
