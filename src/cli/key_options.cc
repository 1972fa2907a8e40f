#include "cli/key_options.h"

namespace cairn::cli {

void AddKeyOptions(CLI::App* cmd, KeyOptions* options) {
  cmd->add_option("--keyfile", options->keyfile, "encryption key file (or CAIRN_KEYFILE)");
  cmd->add_option("--passphrase-file", options->passphrase_file,
                  "file holding the key's passphrase (or CAIRN_PASSPHRASE_FILE, CAIRN_PASSPHRASE)");
}

Result<std::shared_ptr<const crypto::CryptConfig>> LoadKey(const KeyOptions& options) {
  if (options.keyfile.empty()) return std::shared_ptr<const crypto::CryptConfig>();
  return UnimplementedError("key files: not yet");
}

}  // namespace cairn::cli
