// Loading of `cairn serve`'s JSON configuration. Strict on purpose: an
// unknown key or a value of the wrong type is an error naming the file and
// the key, so a typo ("max_conections") never silently leaves a default.
#include "server/server_config.h"

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace cairn::server {

namespace {

constexpr int64_t kMaxConfigSize = 1 << 20;
constexpr char kDefaultListen[] = "127.0.0.1:8007";

using nlohmann::json;

// Errors of one file; every message starts with the file and the key.
class Checker {
 public:
  explicit Checker(const std::string& path) : path_(path) {}

  Status Error(std::string_view key, std::string_view why) const {
    return InvalidArgumentError(fmt::format("server config {}: \"{}\": {}", path_, key, why));
  }
  Result<std::string> String(std::string_view key, const json& v) const {
    if (!v.is_string()) return Error(key, "must be a string");
    std::string s = v.get<std::string>();
    if (s.empty()) return Error(key, "must not be empty");
    return s;
  }
  // A positive integer no larger than `max`.
  Result<int64_t> Positive(std::string_view key, const json& v, int64_t max) const {
    if (!v.is_number_integer()) return Error(key, "must be an integer");
    // Checked as unsigned first: a huge value would wrap in get<int64_t>().
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() >= 1 && v.get<uint64_t>() <= uint64_t(max)
                              : v.get<int64_t>() >= 1 && v.get<int64_t>() <= max;
    if (!in_range) return Error(key, fmt::format("must be between 1 and {}", max));
    return v.get<int64_t>();
  }
  Result<int64_t> NonNegative(std::string_view key, const json& v, int64_t max) const {
    if (v.is_number_integer() && v.get<int64_t>() == 0) return 0;
    return Positive(key, v, max);
  }

 private:
  const std::string& path_;
};

// "HOST:PORT" / "[V6]:PORT" in shape only; binding tells the rest.
bool LooksLikeHostPort(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = text.substr(0, colon);
  std::string_view port = text.substr(colon + 1);
  if (host.find(':') != std::string_view::npos &&
      (host.front() != '[' || host.back() != ']' || host.size() < 3)) {
    return false;
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  return !port.empty() && ec == std::errc() && end == port.data() + port.size() && value <= 65535;
}

Status ParseListen(const Checker& c, const json& v, ServerConfig* config) {
  std::vector<json> items;
  if (v.is_string()) {
    items.push_back(v);
  } else if (v.is_array() && !v.empty()) {
    items.assign(v.begin(), v.end());
  } else {
    return c.Error("listen", "must be a non-empty array of \"HOST:PORT\" strings");
  }
  config->listen.clear();
  for (const json& item : items) {
    CAIRN_ASSIGN_OR_RETURN(std::string addr, c.String("listen", item));
    if (!LooksLikeHostPort(addr)) {
      return c.Error("listen", fmt::format("'{}' is not HOST:PORT (or [IPV6]:PORT)", addr));
    }
    config->listen.push_back(std::move(addr));
  }
  return Status::Ok();
}

Status ParseStores(const Checker& c, const json& v, ServerConfig* config) {
  if (!v.is_object()) return c.Error("stores", "must be an object of NAME: PATH");
  for (const auto& [name, path] : v.items()) {
    const std::string key = "stores." + name;
    if (!IsValidName(name)) {
      return c.Error(key, "a store name is 1 to 64 of A-Z a-z 0-9 . _ -");
    }
    CAIRN_ASSIGN_OR_RETURN(config->stores[name], c.String(key, path));
  }
  return Status::Ok();
}

Status ParseTls(const Checker& c, const json& v, ServerConfig* config) {
  if (!v.is_object()) return c.Error("tls", "must be an object with \"cert\" and \"key\"");
  for (const auto& [key, value] : v.items()) {
    if (key == "cert") {
      CAIRN_ASSIGN_OR_RETURN(config->cert_file, c.String("tls.cert", value));
    } else if (key == "key") {
      CAIRN_ASSIGN_OR_RETURN(config->key_file, c.String("tls.key", value));
    } else {
      return c.Error("tls." + key, "unknown key (expected cert, key)");
    }
  }
  return Status::Ok();
}

// "metrics": {"listen": "HOST:PORT", "refresh_s": N} (server/metrics_listener.h).
Status ParseMetrics(const Checker& c, const json& v, ServerConfig* config) {
  if (!v.is_object()) return c.Error("metrics", "must be an object with \"listen\"");
  for (const auto& [key, value] : v.items()) {
    if (key == "listen") {
      CAIRN_ASSIGN_OR_RETURN(config->metrics_listen, c.String("metrics.listen", value));
      if (!net::ParseHostPort(config->metrics_listen).ok()) {
        return c.Error("metrics.listen", "must be HOST:PORT, like 127.0.0.1:9107");
      }
    } else if (key == "refresh_s") {
      CAIRN_ASSIGN_OR_RETURN(config->metrics_refresh_s, c.Positive("metrics.refresh_s", value, 86400));
    } else {
      return c.Error("metrics." + key, "unknown key (expected listen, refresh_s)");
    }
  }
  return Status::Ok();
}

// The API's and the backup sessions' keys of "limits"; false when `key` is
// none of them.
Result<bool> ParseApiLimit(const Checker& c, const std::string& key, const json& value,
                           ServerConfig* config) {
  const std::string name = "limits." + key;
  SessionLimits* sessions = &config->sessions;
  if (key == "max_reader_chunks") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, int64_t{1} << 34));
    config->api.max_reader_chunks = static_cast<size_t>(n);
  } else if (key == "max_failed_logins_per_minute") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.NonNegative(name, value, 1'000'000));
    config->api.max_failed_logins_per_minute = static_cast<int>(n);
  } else if (key == "max_decoded_mib_per_request") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 1 << 20));
    sessions->max_decoded_per_request = static_cast<uint64_t>(n) << 20;
  } else if (key == "max_decoded_gib_per_session") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, int64_t{1} << 30));
    sessions->max_decoded_per_session = static_cast<uint64_t>(n) << 30;
  } else if (key == "max_sessions_per_token") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 100'000));
    sessions->max_sessions_per_token = static_cast<int>(n);
  } else if (key == "max_groups_per_token") {
    CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 100'000'000));
    sessions->max_groups_per_token = static_cast<int>(n);
  } else {
    return false;
  }
  return true;
}

constexpr char kLimitKeys[] =
    "max_connections, max_connections_per_address, reserved_connections, max_body_mib, "
    "max_header_kib, handshake_timeout_s, header_timeout_s, request_timeout_s, idle_timeout_s, "
    "write_timeout_s, io_threads, worker_threads, max_requests_per_token, token_workers, "
    "max_decoded_mib_per_request, max_decoded_gib_per_session, max_sessions_per_token, "
    "max_groups_per_token, max_reader_chunks, max_failed_logins_per_minute";

Status ParseLimits(const Checker& c, const json& v, ServerConfig* config) {
  if (!v.is_object()) return c.Error("limits", "must be an object");
  constexpr int64_t kDay = 86'400;
  net::ServerOptions* limits = &config->limits;
  for (const auto& [key, value] : v.items()) {
    const std::string name = "limits." + key;
    CAIRN_ASSIGN_OR_RETURN(bool done, ParseApiLimit(c, key, value, config));
    if (done) continue;
    if (key == "max_connections") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 1'000'000));
      limits->max_connections = static_cast<int>(n);
    } else if (key == "max_body_mib") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 4096));
      limits->max_body_bytes = static_cast<size_t>(n) << 20;
    } else if (key == "max_header_kib") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 1024));
      limits->max_header_bytes = static_cast<size_t>(n) << 10;
    } else if (key == "request_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, kDay));
      limits->request_timeout = std::chrono::seconds(n);
    } else if (key == "handshake_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, kDay));
      limits->handshake_timeout = std::chrono::seconds(n);
    } else if (key == "header_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, kDay));
      limits->header_timeout = std::chrono::seconds(n);
    } else if (key == "max_connections_per_address") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 1'000'000));
      limits->max_connections_per_address = static_cast<int>(n);
    } else if (key == "reserved_connections") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.NonNegative(name, value, 1'000'000));
      limits->reserved_connections = static_cast<int>(n);
    } else if (key == "max_requests_per_token") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 1'000'000));
      limits->max_requests_per_tenant = static_cast<int>(n);
    } else if (key == "token_workers") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.NonNegative(name, value, 4096));
      limits->tenant_workers = static_cast<int>(n);
    } else if (key == "idle_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, kDay));
      limits->idle_timeout = std::chrono::seconds(n);
    } else if (key == "write_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, kDay));
      limits->write_timeout = std::chrono::seconds(n);
    } else if (key == "io_threads") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.Positive(name, value, 256));
      limits->io_threads = static_cast<int>(n);
    } else if (key == "worker_threads") {
      CAIRN_ASSIGN_OR_RETURN(int64_t n, c.NonNegative(name, value, 4096));
      limits->worker_threads = static_cast<int>(n);
    } else {
      return c.Error(name, fmt::format("unknown key (expected {})", kLimitKeys));
    }
  }
  return Status::Ok();
}

Status ParseTop(const Checker& c, const json& doc, ServerConfig* config, json* sync_jobs) {
  if (!doc.is_object()) return c.Error("(top level)", "must be a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key == "listen") {
      CAIRN_RETURN_IF_ERROR(ParseListen(c, value, config));
    } else if (key == "state_dir") {
      CAIRN_ASSIGN_OR_RETURN(config->state_dir, c.String(key, value));
    } else if (key == "stores") {
      CAIRN_RETURN_IF_ERROR(ParseStores(c, value, config));
    } else if (key == "tls") {
      CAIRN_RETURN_IF_ERROR(ParseTls(c, value, config));
    } else if (key == "limits") {
      CAIRN_RETURN_IF_ERROR(ParseLimits(c, value, config));
    } else if (key == "log") {
      CAIRN_ASSIGN_OR_RETURN(config->log, c.String(key, value));
    } else if (key == "session_timeout_s") {
      CAIRN_ASSIGN_OR_RETURN(config->session_timeout_s, c.Positive(key, value, 7 * 86400));
    } else if (key == "metrics") {
      CAIRN_RETURN_IF_ERROR(ParseMetrics(c, value, config));
    } else if (key == "sync_jobs") {
      *sync_jobs = value;  // parsed once the stores are known
    } else {
      return c.Error(key, "unknown key (expected listen, state_dir, stores, tls, limits, "
                          "session_timeout_s, log, metrics, sync_jobs)");
    }
  }
  return Status::Ok();
}

Result<std::string> ReadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoToStatus(errno, fmt::format("opening server config {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return ErrnoToStatus(errno, fmt::format("reading server config {}", path));
  std::string s = std::move(text).str();
  if (static_cast<int64_t>(s.size()) > kMaxConfigSize) {
    return InvalidArgumentError(
        fmt::format("server config {} is larger than {} bytes", path, kMaxConfigSize));
  }
  return s;
}

std::string MakeAbsolute(const std::string& path, const std::string& base) {
  std::filesystem::path p(path);
  if (p.is_absolute()) return p.lexically_normal().string();
  return (std::filesystem::path(base) / p).lexically_normal().string();
}

}  // namespace

net::ServerOptions ServerConfig::ToServerOptions() const {
  net::ServerOptions options = limits;
  options.listen = listen;
  options.cert_file = cert_file;
  options.key_file = key_file;
  return options;
}

Result<ServerConfig> LoadServerConfig(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(std::string text, ReadConfigFile(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/false);
  if (doc.is_discarded()) {
    // Parse again with exceptions for the position of the error.
    std::string why = "not valid JSON";
    try {
      doc = json::parse(text);
    } catch (const json::exception& e) {
      why = e.what();
    }
    return InvalidArgumentError(fmt::format("server config {}: {}", path, why));
  }
  ServerConfig config;
  json sync_jobs;
  CAIRN_RETURN_IF_ERROR(ParseTop(Checker(path), doc, &config, &sync_jobs));
  if (!sync_jobs.is_null()) {
    auto jobs = ParseSyncJobs(sync_jobs, config.stores);
    if (!jobs.ok()) return jobs.status().WithContext("server config " + path);
    config.sync_jobs = std::move(jobs).value();
  }
  if (Status s = FinishConfig(&config); !s.ok()) return s.WithContext("server config " + path);
  return config;
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  // "." and ".." would be path components and URL dot-segments.
  if (name == "." || name == "..") return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) return false;
  }
  return true;
}

Result<std::pair<std::string, std::string>> ParseStoreFlag(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return InvalidArgumentError(
        fmt::format("--store '{}': expected NAME=PATH (for example main=/srv/cairn)", text));
  }
  std::string name = text.substr(0, eq);
  std::string path = text.substr(eq + 1);
  if (!IsValidName(name)) {
    return InvalidArgumentError(fmt::format(
        "--store '{}': bad store name '{}': use 1 to 64 of A-Z a-z 0-9 . _ -", text, name));
  }
  if (path.empty()) {
    return InvalidArgumentError(fmt::format("--store '{}': the datastore path is empty", text));
  }
  return std::make_pair(std::move(name), std::move(path));
}

Status FinishConfig(ServerConfig* config) {
  if (config->state_dir.empty()) {
    return InvalidArgumentError(
        "no state directory: set \"state_dir\" in the config or pass --state-dir DIR");
  }
  if (config->stores.empty()) {
    return InvalidArgumentError(
        "no datastore to serve: add \"stores\" to the config or pass --store NAME=PATH");
  }
  for (const auto& [name, path] : config->stores) {
    if (!IsValidName(name)) return InvalidArgumentError(fmt::format("bad store name '{}'", name));
    if (path.empty()) return InvalidArgumentError(fmt::format("store '{}' has no path", name));
  }
  if (config->listen.empty()) config->listen = {kDefaultListen};
  std::error_code ec;
  const std::string cwd = std::filesystem::current_path(ec).string();
  if (ec) return ErrnoToStatus(ec.value(), "finding the current directory");
  config->state_dir = MakeAbsolute(config->state_dir, cwd);
  if (config->cert_file.empty()) config->cert_file = "tls/cert.pem";
  if (config->key_file.empty()) config->key_file = "tls/key.pem";
  config->cert_file = MakeAbsolute(config->cert_file, config->state_dir);
  config->key_file = MakeAbsolute(config->key_file, config->state_dir);
  if (config->log.empty()) config->log = "stderr";
  config->sessions.timeout = std::chrono::seconds(config->session_timeout_s);
  return Status::Ok();
}

}  // namespace cairn::server
