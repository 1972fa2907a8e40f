// cairn key create|change-passphrase|show|export|import.
#include "cli/cli_util.h"

namespace cairn::cli {

void RegisterKey(CLI::App& app, Context& ctx) {
  auto* key = app.add_subcommand("key", "create and manage encryption keys");
  key->require_subcommand(1);
  (void)ctx;
}

}  // namespace cairn::cli
