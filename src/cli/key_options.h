// Where the encryption key comes from on the command line: --keyfile PATH or
// CAIRN_KEYFILE, and its passphrase from CAIRN_PASSPHRASE, --passphrase-file
// F / CAIRN_PASSPHRASE_FILE, or a prompt on the terminal (/dev/tty, no echo).
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/status.h"
#include "crypto/crypt_config.h"

namespace cairn::cli {

struct KeyOptions {
  std::string keyfile;          // --keyfile, else CAIRN_KEYFILE
  std::string passphrase_file;  // --passphrase-file, else CAIRN_PASSPHRASE_FILE
};

// Adds --keyfile and --passphrase-file to a subcommand.
void AddKeyOptions(CLI::App* cmd, KeyOptions* options);

// The key named by the options or the environment, unwrapped; null when no
// key file is named (the operation runs unencrypted). Errors say which file
// and why: missing, unsafe permissions (group/other may read it), truncated
// or malformed, wrong passphrase, no passphrase and no terminal.
Result<std::shared_ptr<const crypto::CryptConfig>> LoadKey(const KeyOptions& options);

}  // namespace cairn::cli
