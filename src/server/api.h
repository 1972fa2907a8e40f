// The HTTP API of `cairn serve` (docs/SERVER.md, "HTTP API"): every request
// authenticated by token, authorised by role and datastore, then answered
// from the datastores named in the configuration.
//
// Two steps, as net::HttpServer runs them: Admit() sees the header only (on
// an I/O thread) and decides whether the body is worth reading: the token
// is checked there (with the failed-login limit), so an unauthenticated
// client never gets a body read, and each route has its own body limit.
// Handle() then answers on a worker; it checks the token again, so it is
// complete on its own (the fuzzer calls it directly). Handlers block on
// their own work (file reads, hashing), never on the client.
//
// What a compromised client can and cannot do is docs/SECURITY.md's
// "Threat model of the server"; refused requests go to the audit log
// (STATE_DIR/audit.log); error answers and task logs never show the
// server's paths.
//
// Thread safety: Admit() and Handle() may be called concurrently.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "net/http_server.h"
#include "protocol/chunk_frames.h"
#include "protocol/routes.h"
#include "server/backup_session.h"
#include "server/sync_jobs.h"
#include "server/tokens.h"

namespace cairn::server {

class ServerMetrics;
struct TaskInfo;

struct ApiOptions {
  std::string state_dir;  // the server's state directory: tasks/, audit.log
  // Backup sessions: the idle timeout, the decoded-bytes caps and the
  // per-token quotas (server/backup_session.h).
  SessionLimits sessions;
  // The largest body of a chunk or file upload (a backup token's).
  size_t max_body_bytes = 64 << 20;
  // Chunks of the indexes a reader read that it may then download
  // (server/read_grants.h): at most this many per token and datastore.
  size_t max_reader_chunks = size_t{8} << 20;
  // Failed logins from one address per minute before its logins are
  // refused for the rest of the minute. 0: no limit.
  int max_failed_logins_per_minute = 20;
  // Chunk reads and writes are counted here (server/metrics.h); null: not.
  ServerMetrics* metrics = nullptr;
  // Sync jobs (server/sync_jobs.h), run as tasks on their schedule and on
  // demand; without an opener, none.
  std::vector<SyncJob> sync_jobs;
  SyncSourceOpener open_sync_source;
  // For tests only (`cairn serve --inject-task-latency`, hidden): every
  // chunk read of a verify task sleeps this long, one at a time, so a test
  // can watch one run.
  int64_t task_read_latency_us = 0;
};

struct ApiShared;

class Api {
 public:
  // `stores`: name → opened datastore. REQUIRES: all outlive the Api.
  Api(Env& env, Logger& logger, TokenStore& tokens,
      std::map<std::string, std::unique_ptr<datastore::Datastore>> stores,
      ApiOptions options = {});
  ~Api();

  // The header step (net::Admitter): authenticates and sets the route's
  // body limit; refuses (401, 429, 403) before any body is read.
  net::Admission Admit(const net::HttpRequest& header);
  void Handle(const net::HttpRequest& request, net::ResponseWriter& response);
  // net::ServerOptions::on_connection_closed: backup sessions learn that
  // their client is gone.
  void ConnectionClosed(uint64_t connection, bool by_client);

  // For the metrics (server/metrics.h): backup sessions open, and every
  // task the server knows (read from the state directory).
  size_t OpenSessions();
  std::vector<TaskInfo> Tasks();
  // What GET /metrics on the API port answers (metrics and admin tokens;
  // a token bound to one datastore gets only its series). Until set, 404.
  void SetMetricsRenderer(std::function<std::string()> render);

 private:
  std::unique_ptr<ApiShared> shared_;
};

}  // namespace cairn::server
