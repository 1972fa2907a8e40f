// The insides of server::Api (api.h): what its requests share, and one
// request's handling, split by concern over api.cc (routing, tokens, roles,
// snapshots, files, grants), api_chunks.cc (chunk downloads, backup
// sessions) and api_admin.cc (status, prune, forget, protect, notes, tasks).
// Not part of the server's interface.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/mutex.h"
#include "protocol/messages.h"
#include "server/api.h"
#include "server/audit_log.h"
#include "server/read_grants.h"
#include "server/scrub.h"
#include "server/tasks.h"
#include "server/web/dashboard.h"

namespace cairn::server {

// Owned by Api, shared by all its requests (and by the streams they leave
// running on the connection).
struct ApiShared {
  ApiShared(Env& env, Logger& logger, TokenStore& tokens,
            std::map<std::string, std::unique_ptr<datastore::Datastore>> stores,
            ApiOptions options);

  Env& env;
  Logger& logger;
  TokenStore& tokens;
  std::map<std::string, std::unique_ptr<datastore::Datastore>> stores;
  const ApiOptions options;
  PathScrubber scrubber;
  AuditLog audit;
  LoginLimiter logins;
  // The web dashboard's pages and sessions (server/web/dashboard.h).
  Dashboard dashboard;
  ReadGrants grants;
  SessionRegistry sessions;
  // Declared after stores: destroyed (running tasks cancelled and joined)
  // before the datastores.
  std::unique_ptr<TaskManager> tasks;
  // Starts scheduled sync jobs as tasks; destroyed (its thread joined)
  // before them.
  std::unique_ptr<SyncScheduler> scheduler;
  // The exposition of GET /metrics (Api::SetMetricsRenderer); empty: 404.
  Mutex metrics_mu;
  std::function<std::string()> render_metrics GUARDED_BY(metrics_mu);
};

// An error answer's status for a Status of the datastore code.
using protocol::HttpStatusFor;
// Client input echoed in a message need not be UTF-8: replaced, not thrown.
std::string Dump(const nlohmann::json& body);

// Reads chunk `id` of `store` into `out` for `token`: NotFound for a chunk
// the token may not read, exactly as for one that does not exist.
//   admin:          any chunk;
//   reader, verify: chunks of the indexes it read (ReadGrants);
//   backup:         chunks of its open sessions' bases, stored in the base's
//                   mode (SessionRegistry::ReadableModes).
Status ReadChunkAs(ApiShared& api, const Token& token, const std::string& store_name,
                   datastore::Datastore& store, const crypto::Digest& id, ReadBuffer* out);
// The same check for a chunk read ahead (object stores): `stored` is what
// was read; NotFound when the token may not have it.
Status CheckChunkAs(ApiShared& api, const Token& token, const std::string& store_name,
                    const crypto::Digest& id, ByteSpan stored);
// Whether the token's role reads chunks by grant (reader, verify).
inline bool ReadsByGrant(Role role) { return role == Role::kReader || role == Role::kVerify; }

class Request {
 public:
  Request(ApiShared& api, const net::HttpRequest& request, net::ResponseWriter& response)
      : api_(api), req_(request), res_(response) {}
  void Run();

 private:
  using json = nlohmann::json;

  // --- api.cc ---
  bool Method(std::string_view want);
  bool Authenticate();
  bool PickStore(std::string_view name);
  bool Allowed(Action action, std::string_view what);
  // Backup tokens see only the groups they own.
  bool OwnsGroup(const datastore::GroupRef& group);
  // The snapshot of ?ns=&snapshot=, when it exists and the token may read
  // it; otherwise answered (a backup token gets the same 404 for another
  // token's group as for no group).
  std::optional<datastore::SnapshotRef> Snapshot();
  // The snapshots a listing shows this token (a GET listing them is
  // allowed; a backup token's own groups only), in listing order;
  // nullopt when refused or the listing failed (answered). A snapshot
  // forgotten meanwhile may still be among them: callers skip one whose
  // manifest is gone.
  std::optional<std::vector<datastore::SnapshotRef>> VisibleSnapshots();
  void ListStores();
  void ListSnapshots();
  void GetFile();
  void Grant();
  // Grants the chunks of index file `name` (bytes `data`) of `snap` to a
  // reader: OK for other roles and other files.
  Status GrantIndex(const datastore::SnapshotRef& snap, const std::string& name, ByteSpan data);
  void SpeedTest();
  void SendJson(int status, const json& body);
  // Every error answer: the server's paths scrubbed; 401, 403 and 429, and
  // any answer given a `reason` (one that says less than the truth),
  // recorded in the audit log with the reason.
  void SendError(int status, std::string_view message, std::string_view reason = {});
  void SendStatus(const Status& s) { SendError(HttpStatusFor(s), s.message()); }
  std::string Query(const std::string& name) const;

  // --- api_chunks.cc ---
  bool MayReadChunks();
  void GetChunk(std::string_view hex);
  void GetChunks();
  void Backup(const protocol::Route& route);
  void BackupStep(const std::string& id, std::string_view what);

  // --- api_metrics.cc ---
  // GET /metrics on the API port: a metrics or admin token.
  void Metrics();

  // --- api_dashboard.cc ---
  // GET …/snapshots?details=1: what `cairn snapshots --json` prints.
  void ListSnapshotDetails();
  // GET …/tree?ns=&snapshot=&archive=&path=: the entries of a directory of
  // a tree archive; with &download=1 a regular file's bytes.
  void Tree();
  // GET …/throughput: the datastore's chunk bytes in and out per interval
  // of the last hour (ServerMetrics::Throughput).
  void Throughput();

  // --- api_admin.cc ---
  void GetStatus();
  void Prune();
  void Forget();
  void Protect();
  void Notes();
  bool TaskVisible(const TaskInfo& task) const;
  void StartTask(std::string_view kind);
  Result<TaskManager::Started> StartTaskOf(std::string_view kind, const json& body);
  // GET …/stores/S/sync-jobs: the jobs into S, their schedule and last result.
  void ListSyncJobs();
  void TaskRoutes(const protocol::Route& route);

  ApiShared& api_;
  const net::HttpRequest& req_;
  net::ResponseWriter& res_;
  Token token_;
  bool authenticated_ = false;
  std::string store_name_;
  datastore::Datastore* store_ = nullptr;
};

}  // namespace cairn::server
