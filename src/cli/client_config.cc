#include "cli/client_config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

namespace cairn::cli {
namespace {

constexpr size_t kMaxConfigSize = 1 << 20;

// Errors of one file; every message names the file and the key.
class Checker {
 public:
  explicit Checker(const std::string& path, std::string_view kind) : path_(path), kind_(kind) {}

  Status Error(std::string_view key, std::string_view why) const {
    return InvalidArgumentError(fmt::format("{} {}: \"{}\": {}", kind_, path_, key, why));
  }
  Status String(const std::string& key, const toml::node& v, std::string* out) const {
    const auto* s = v.as_string();
    if (s == nullptr) return Error(key, "must be a string");
    if (s->get().empty()) return Error(key, "must not be empty");
    *out = s->get();
    return Status::Ok();
  }
  Status Strings(const std::string& key, const toml::node& v, std::vector<std::string>* out) const {
    const auto* a = v.as_array();
    if (a == nullptr) return Error(key, "must be an array of strings");
    for (const toml::node& item : *a) {
      std::string s;
      CAIRN_RETURN_IF_ERROR(String(key, item, &s));
      out->push_back(std::move(s));
    }
    return Status::Ok();
  }

 private:
  const std::string& path_;
  std::string_view kind_;
};

// One of RepositorySettings' keys; false when `key` is none of them.
Result<bool> SettingsKey(const Checker& c, const std::string& prefix, const std::string& key,
                         const toml::node& v, RepositorySettings* s) {
  std::string* field = key == "ns"                 ? &s->ns
                       : key == "token"            ? &s->token
                       : key == "fingerprint"      ? &s->fingerprint
                       : key == "keyfile"          ? &s->keyfile
                       : key == "passphrase_file"  ? &s->passphrase_file
                       : key == "password_command" ? &s->password_command
                       : key == "limit_upload"     ? &s->limit_upload
                       : key == "limit_download"   ? &s->limit_download
                                                   : nullptr;
  if (field == nullptr) return false;
  CAIRN_RETURN_IF_ERROR(c.String(prefix + key, v, field));
  return true;
}
constexpr char kSettingsKeys[] =
    "ns, token, fingerprint, keyfile, passphrase_file, password_command, limit_upload, "
    "limit_download";

// "~/x" → $HOME/x, for the path-valued keys.
std::string ExpandHome(const std::string& path) {
  if (!path.starts_with("~/")) return path;
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + path.substr(1) : path;
}
void ExpandPaths(RepositorySettings* s) {
  s->keyfile = ExpandHome(s->keyfile);
  s->passphrase_file = ExpandHome(s->passphrase_file);
}

Result<toml::table> ParseToml(std::string_view text, const std::string& path,
                              std::string_view kind) {
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(fmt::format("{} {}: line {}, column {}: {}", kind, path,
                                            e.source().begin.line, e.source().begin.column,
                                            e.description()));
  }
}

Status RefuseSharedSecrets(bool private_file, const std::string& path, std::string_view kind,
                           bool has_token) {
  if (private_file || !has_token) return Status::Ok();
  return FailedPreconditionError(fmt::format(
      "{} {} holds a token but group or others may read it: run chmod 600 {}", kind, path, path));
}

Status ParseRepository(const Checker& c, const std::string& name, const toml::node& v,
                       ClientConfig* config) {
  const std::string prefix = "repository." + name + ".";
  const auto* t = v.as_table();
  if (t == nullptr) return c.Error("repository." + name, "must be a table");
  RepositoryEntry entry;
  entry.name = name;
  for (const auto& [k, value] : *t) {
    const std::string key(k.str());
    if (key == "url") {
      CAIRN_RETURN_IF_ERROR(c.String(prefix + key, value, &entry.url));
      continue;
    }
    CAIRN_ASSIGN_OR_RETURN(bool known, SettingsKey(c, prefix, key, value, &entry.settings));
    if (!known) {
      return c.Error(prefix + key, fmt::format("unknown key (expected url, {})", kSettingsKeys));
    }
  }
  if (entry.url.empty()) return c.Error(prefix + "url", "is required");
  ExpandPaths(&entry.settings);
  entry.url = ExpandHome(entry.url);
  config->repositories.emplace(name, std::move(entry));
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::string& path, bool* private_file) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, fmt::format("opening {}", path));
  struct stat st;
  *private_file = ::stat(path.c_str(), &st) == 0 && (st.st_mode & 077) == 0;
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = std::move(text).str();
  if (s.size() > kMaxConfigSize) {
    return InvalidArgumentError(fmt::format("{} is larger than {} bytes", path, kMaxConfigSize));
  }
  return s;
}

}  // namespace

const RepositoryEntry* ClientConfig::Find(std::string_view name) const {
  auto it = repositories.find(std::string(name));
  return it == repositories.end() ? nullptr : &it->second;
}

std::string DefaultClientConfigPath() {
  if (const char* p = std::getenv("CAIRN_CONFIG"); p && *p) return p;
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/cairn/config.toml";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.config/cairn/config.toml";
  }
  return "";
}

Result<ClientConfig> ParseClientConfig(std::string_view text, const std::string& path,
                                       bool private_file) {
  constexpr std::string_view kKind = "config file";
  CAIRN_ASSIGN_OR_RETURN(toml::table doc, ParseToml(text, path, kKind));
  Checker c(path, kKind);
  ClientConfig config;
  config.path = path;
  bool has_token = false;
  for (const auto& [k, value] : doc) {
    const std::string key(k.str());
    if (key == "defaults") {
      const auto* t = value.as_table();
      if (t == nullptr) return c.Error(key, "must be a table");
      for (const auto& [dk, dv] : *t) {
        const std::string name = "defaults." + std::string(dk.str());
        std::string_view dkey = dk.str();
        std::string* field = dkey == "repository"       ? &config.default_repository
                             : dkey == "limit_upload"   ? &config.limit_upload
                             : dkey == "limit_download" ? &config.limit_download
                                                      : nullptr;
        if (field == nullptr) {
          return c.Error(name, "unknown key (expected repository, limit_upload, limit_download)");
        }
        CAIRN_RETURN_IF_ERROR(c.String(name, dv, field));
      }
    } else if (key == "repository") {
      const auto* t = value.as_table();
      if (t == nullptr) return c.Error(key, "must be a table of [repository.NAME] tables");
      for (const auto& [name, entry] : *t) {
        CAIRN_RETURN_IF_ERROR(ParseRepository(c, std::string(name.str()), entry, &config));
        has_token = has_token || !config.repositories.at(std::string(name.str())).settings.token.empty();
      }
    } else {
      return c.Error(key, "unknown key (expected [defaults] or [repository.NAME])");
    }
  }
  if (!config.default_repository.empty() && config.Find(config.default_repository) == nullptr) {
    return c.Error("defaults.repository",
                   fmt::format("names no [repository.{}] table", config.default_repository));
  }
  CAIRN_RETURN_IF_ERROR(RefuseSharedSecrets(private_file, path, kKind, has_token));
  return config;
}

Result<ClientConfig> LoadClientConfig(const std::string& path, bool optional) {
  bool private_file = false;
  auto text = ReadSmallFile(path, &private_file);
  if (!text.ok()) {
    if (optional && text.status().code() == StatusCode::kNotFound) return ClientConfig{};
    return text.status().WithContext("config file");
  }
  return ParseClientConfig(*text, path, private_file);
}

Result<BackupJob> ParseBackupJob(std::string_view text, const std::string& path,
                                 bool private_file) {
  constexpr std::string_view kKind = "backup job";
  CAIRN_ASSIGN_OR_RETURN(toml::table doc, ParseToml(text, path, kKind));
  Checker c(path, kKind);
  BackupJob job;
  job.path = path;
  for (const auto& [k, value] : doc) {
    const std::string key(k.str());
    if (key == "repository") {
      CAIRN_RETURN_IF_ERROR(c.String(key, value, &job.repository));
    } else if (key == "id") {
      CAIRN_RETURN_IF_ERROR(c.String(key, value, &job.id));
    } else if (key == "sources") {
      CAIRN_RETURN_IF_ERROR(c.Strings(key, value, &job.sources));
    } else if (key == "excludes") {
      CAIRN_RETURN_IF_ERROR(c.Strings(key, value, &job.excludes));
    } else if (key == "exclude_files") {
      CAIRN_RETURN_IF_ERROR(c.Strings(key, value, &job.exclude_files));
    } else if (key == "cross_fs") {
      const auto* b = value.as_boolean();
      if (b == nullptr) return c.Error(key, "must be true or false");
      job.cross_fs = b->get();
    } else if (key == "keep") {
      const auto* t = value.as_table();
      if (t == nullptr) return c.Error(key, "must be a table of RULE = COUNT");
      for (const auto& [rk, rv] : *t) {
        const std::string rule(rk.str());
        const std::string name = "keep." + rule;
        if (rule != "last" && rule != "hourly" && rule != "daily" && rule != "weekly" &&
            rule != "monthly" && rule != "yearly") {
          return c.Error(name, "unknown rule (expected last, hourly, daily, weekly, monthly, yearly)");
        }
        const auto* n = rv.as_integer();
        if (n == nullptr || n->get() < 1 || n->get() > 1000000) {
          return c.Error(name, "must be a whole number from 1 to 1000000");
        }
        job.keep[rule] = n->get();
      }
    } else {
      CAIRN_ASSIGN_OR_RETURN(bool known, SettingsKey(c, "", key, value, &job.settings));
      if (!known) {
        return c.Error(key, fmt::format("unknown key (expected repository, id, sources, excludes, "
                                        "exclude_files, cross_fs, keep, {})",
                                        kSettingsKeys));
      }
    }
  }
  if (job.repository.empty()) return c.Error("repository", "is required");
  if (job.id.empty()) return c.Error("id", "is required (the backup group, like host/web1)");
  if (job.sources.empty()) {
    return c.Error("sources", "is required: one or more \"NAME.tree=/DIR\", \"NAME.img=FILE\"");
  }
  ExpandPaths(&job.settings);
  CAIRN_RETURN_IF_ERROR(RefuseSharedSecrets(private_file, path, kKind, !job.settings.token.empty()));
  return job;
}

Result<BackupJob> LoadBackupJob(const std::string& path) {
  bool private_file = false;
  CAIRN_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, &private_file));
  return ParseBackupJob(text, path, private_file);
}

}  // namespace cairn::cli
