// Configuration of `cairn serve`: from a JSON file (--config FILE; sample in
// packaging/cairn-server.json) or from the quick-start flags (--listen,
// --store NAME=PATH, --state-dir DIR). docs/SERVER.md describes every key.
//
//   {
//     "listen": ["127.0.0.1:8007"],
//     "state_dir": "/var/lib/cairn",           // tokens.json, tls/, tasks/
//     "stores": {"main": "/srv/cairn/main"},
//     "tls": {"cert": "tls/cert.pem", "key": "tls/key.pem"},   // relative: to state_dir
//     "limits": {"max_connections": 256, "max_body_mib": 64,
//                "request_timeout_s": 60, "idle_timeout_s": 120, …},  // docs/SERVER.md
//     "session_timeout_s": 900,
//     "log": "stderr" | "FILE",
//     "metrics": {"listen": "127.0.0.1:9107", "refresh_s": 300},  // Prometheus, plain HTTP
//     "sync_jobs": {"offsite": {"store": "main", "from": "https://…", …}}  // server/sync_jobs.h
//   }
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "net/http_server.h"
#include "server/api.h"
#include "server/backup_session.h"

namespace cairn::server {

struct ServerConfig {
  std::vector<std::string> listen;            // default {"127.0.0.1:8007"}
  std::string state_dir;                      // required
  std::map<std::string, std::string> stores;  // name → datastore path; at least one
  std::string cert_file;                      // absolute after load
  std::string key_file;
  net::ServerOptions limits;  // listen/cert/key left empty here; see ToServerOptions
  std::string log = "stderr";
  // Prometheus' GET /metrics on this plain-HTTP address ("": none), and how
  // often the per-datastore figures are read (server/metrics.h).
  std::string metrics_listen;
  int64_t metrics_refresh_s = 300;
  // Backup sessions idle this long are aborted (SessionLimits::timeout).
  int64_t session_timeout_s = 900;
  // Backup sessions' caps and quotas (the timeout above is set into it by
  // FinishConfig).
  SessionLimits sessions;
  // The API's own limits (readers' grants, failed logins); its state_dir,
  // sessions and max_body_bytes are filled from the fields above.
  ApiOptions api;
  // Sync jobs that pull into the stores above (server/sync_jobs.h).
  std::vector<SyncJob> sync_jobs;

  // Options for net::HttpServer: limits plus listen, cert and key.
  net::ServerOptions ToServerOptions() const;
};

// Parses the file. InvalidArgument naming the file and the key for
// anything malformed or unknown (a typo in a key is an error, not ignored).
Result<ServerConfig> LoadServerConfig(const std::string& path);

// "NAME=PATH" → (name, path). Names: [A-Za-z0-9._-]{1,64}.
Result<std::pair<std::string, std::string>> ParseStoreFlag(const std::string& text);
bool IsValidName(std::string_view name);

// Fills defaults: cert/key under STATE_DIR/tls/ when not set, relative paths
// made absolute against state_dir. InvalidArgument when no store is given
// or a state_dir is missing.
Status FinishConfig(ServerConfig* config);

}  // namespace cairn::server
