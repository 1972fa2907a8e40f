// The client config file: named repositories, so that `-r NAME` (or
// CAIRN_REPO=NAME) stands for a URL or path with its token, fingerprint,
// key and limits, and defaults for every command. TOML (toml++, Debian's
// libtomlplusplus-dev), read from $CAIRN_CONFIG, else
// $XDG_CONFIG_HOME/cairn/config.toml, else ~/.config/cairn/config.toml:
//
//   [defaults]
//   repository = "main"          # when neither -r nor CAIRN_REPO is given
//   limit_upload = "20M"         # bytes per second (K, M, G = KiB, MiB, GiB)
//
//   [repository.main]
//   url = "https://backup.example.com:8007/main"   # or a path, or s3://…
//   token = "host1:5f0c…"        # the file must then be private (chmod 600)
//   fingerprint = "3f:a2:…"
//   keyfile = "~/.config/cairn/key.json"
//   password_command = "pass show cairn/main"
//
// Also the job files of the backup timer (/etc/cairn/backup.d/NAME.conf,
// `cairn job run`): what to back up, where, and what to keep.
//
// Strict like the server's config: an unknown key or a value of the wrong
// type is an error naming the file and the key. Precedence, highest first:
// flags, environment variables, the named repository's keys, [defaults].
//
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace cairn::cli {

// What a repository needs besides its location; every key optional.
struct RepositorySettings {
  std::string ns;
  std::string token;
  std::string fingerprint;
  std::string keyfile;
  std::string passphrase_file;
  std::string password_command;
  std::string limit_upload;
  std::string limit_download;
};

struct RepositoryEntry {
  std::string name;
  std::string url;  // a path, https://HOST:PORT/STORE or s3://…
  RepositorySettings settings;
};

struct ClientConfig {
  std::string path;  // the file read; "" when there was none
  std::string default_repository;
  std::string limit_upload;    // [defaults]
  std::string limit_download;
  std::map<std::string, RepositoryEntry> repositories;

  // The entry named `name`, or null.
  const RepositoryEntry* Find(std::string_view name) const;
};

// $CAIRN_CONFIG, else $XDG_CONFIG_HOME/cairn/config.toml, else
// $HOME/.config/cairn/config.toml; "" when none of the variables is set.
std::string DefaultClientConfigPath();

// Parses `text`, the contents of `path` (for messages). `private_file`:
// the file may be read only by its owner; a file that holds a token and is
// not private is refused (FailedPrecondition, "chmod 600").
Result<ClientConfig> ParseClientConfig(std::string_view text, const std::string& path,
                                       bool private_file = true);
// Reads and parses `path`. A missing file is an empty config when
// `optional`, else NotFound.
Result<ClientConfig> LoadClientConfig(const std::string& path, bool optional);

// A job of the backup timer (cairn-backup@NAME.service runs `cairn job run
// /etc/cairn/backup.d/NAME.conf`):
//
//   repository = "/srv/cairn/main"      # a path, URL or a name from config.toml
//   id = "host/web1"
//   sources = ["root.tree=/", "etc.blob=/etc/fstab"]
//   excludes = ["/proc", "/sys", "/dev", "/run", "/tmp"]
//   exclude_files = []
//   cross_fs = false
//   keyfile = "/etc/cairn/key.json"     # and the other RepositorySettings keys
//   passphrase_file = "/etc/cairn/key.pass"
//   [keep]                               # prune the group after a backup
//   last = 3
//   daily = 7
//   weekly = 4
//   monthly = 6
struct BackupJob {
  std::string path;
  std::string repository;
  std::string id;
  std::vector<std::string> sources;
  std::vector<std::string> excludes;
  std::vector<std::string> exclude_files;
  bool cross_fs = false;
  RepositorySettings settings;
  // keep rule name (last, hourly, daily, weekly, monthly, yearly) → count
  std::map<std::string, int64_t> keep;
};
Result<BackupJob> ParseBackupJob(std::string_view text, const std::string& path,
                                 bool private_file = true);
Result<BackupJob> LoadBackupJob(const std::string& path);

}  // namespace cairn::cli
