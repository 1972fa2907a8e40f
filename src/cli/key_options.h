// Where the encryption key comes from on the command line: --keyfile PATH or
// CAIRN_KEYFILE, and its passphrase from --passphrase-file F,
// --password-command CMD, CAIRN_PASSPHRASE, CAIRN_PASSPHRASE_FILE,
// CAIRN_PASSWORD_COMMAND, or a prompt on the terminal (/dev/tty, no echo),
// in that order. (The client config file can supply a key file, passphrase
// file or password command for a named repository: client_config.h.)
//
// Also the pieces `cairn key` shares with LoadKey: reading a key file that
// only its owner may read, writing one (mode 0600, atomically), reading a
// passphrase from those sources.
//
// Thread safety: none needed; the CLI calls these from its one thread.
// ReadPassphrase installs signal handlers while it prompts.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "crypto/crypt_config.h"

namespace cairn::cli {

struct KeyOptions {
  std::string keyfile;          // --keyfile, else CAIRN_KEYFILE
  std::string passphrase_file;  // --passphrase-file, else CAIRN_PASSPHRASE_FILE
  std::string password_command;  // --password-command, else CAIRN_PASSWORD_COMMAND
};

// Adds --keyfile, --passphrase-file and --password-command to a subcommand.
void AddKeyOptions(CLI::App* cmd, KeyOptions* options);

// The key named by the options or the environment, unwrapped; null when no
// key file is named (the operation runs unencrypted). Errors say which file
// and why: missing, unsafe permissions (group/other may read it), truncated
// or malformed, wrong passphrase, no passphrase and no terminal.
Result<std::shared_ptr<const crypto::CryptConfig>> LoadKey(const KeyOptions& options);

// --- building blocks -----------------------------------------------------

// The key file named by --keyfile, else CAIRN_KEYFILE; "" when neither.
std::string NamedKeyFile(const KeyOptions& options);

// Where `cairn key create` puts a key by default:
// $XDG_CONFIG_HOME/cairn/key.json, else $HOME/.config/cairn/key.json.
// FailedPrecondition when neither variable is set.
Result<std::string> DefaultKeyFilePath();

enum class KeyFileAccess {
  kPrivate,  // refuse a file group or others may read or write (like ssh)
  kWarn,     // read it, printing a warning on stderr (show, export)
};
// A key file's text. NotFound naming the path when absent;
// FailedPrecondition when it is not a regular file or (kPrivate) when its
// mode lets group or others in ("run chmod 600 PATH").
Result<std::string> ReadKeyFile(const std::string& path, KeyFileAccess access);

// Writes a key file with mode 0600: a temporary file beside `path`, fsync,
// rename over `path` (when `replace`) or a rename that refuses to replace
// (AlreadyExists otherwise), fsync of the directory. Missing parent
// directories are created with mode 0700. A crash leaves the old file or
// the new one, never a mix, never a group-readable copy.
Status WriteKeyFile(const std::string& path, std::string_view text, bool replace);

// Where a passphrase is read from, first that is set wins: `file`,
// `command`, the variable `env`, the file named by the variable `file_env`,
// the command in the variable `command_env`, the terminal. A file's or a
// command's one trailing newline is not part of the passphrase.
struct PassphraseSources {
  std::string file;                // --passphrase-file and the like
  std::string command;             // --password-command: a shell command printing it
  const char* env = nullptr;       // "CAIRN_PASSPHRASE"
  const char* file_env = nullptr;  // "CAIRN_PASSPHRASE_FILE"
  const char* command_env = nullptr;  // "CAIRN_PASSWORD_COMMAND"
  std::string prompt;              // "Passphrase for key FILE: "
  bool confirm = false;            // on the terminal, ask twice and compare
  // For the error when no source is set and there is no terminal: what the
  // passphrase is for ("key file FILE") and how to give it ("set
  // CAIRN_PASSPHRASE or pass --passphrase-file FILE").
  std::string what;
  std::string how_to_give;
};
// FailedPrecondition when nothing is set and there is no terminal, or when
// a password command fails (exit status other than 0, killed, no output);
// InvalidArgument when the two answers differ; NotFound for a missing file.
Result<std::string> ReadPassphrase(const PassphraseSources& sources);

// Runs `command` with /bin/sh -c, stdin and stderr inherited (so it may
// ask on the terminal, like `pass` or `gpg`), and returns what it printed
// on stdout less one trailing newline. At most 4 KiB.
Result<std::string> RunPasswordCommand(const std::string& command);

// The standard sources of the passphrase of key file `path`, for LoadKey
// and `cairn key`.
PassphraseSources KeyPassphraseSources(const KeyOptions& options, const std::string& path);

// An error of crypto::UnwrapKey or ParseKeyFile on key file `path`, said
// for the command line: "wrong passphrase for key file PATH", else the
// error with the path in front.
Status KeyFileError(const Status& s, const std::string& path);

}  // namespace cairn::cli
