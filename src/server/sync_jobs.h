// Sync jobs of `cairn serve` (docs/SERVER.md, "Sync jobs"): named pulls
// from another repository (a server, a path, an object store) into one of
// this server's datastores, defined in the config's "sync_jobs", run as
// server tasks (server/tasks.h) on their schedule and on demand
// (POST /api/v1/stores/S/sync {"job": NAME}, admin tokens).
//
//   "sync_jobs": {
//     "offsite": {"store": "main", "from": "https://pbs1:8007/main",
//                 "token": "pull:SECRET", "fingerprint": "ab:cd:…",
//                 "schedule": "daily",          // server/schedule.h; none: on demand only
//                 "ns": "site1", "target_ns": "copies/site1", "max_depth": 2,
//                 "groups": ["vm/100"], "group_filter": ["type:vm"],
//                 "transfer_last": 3, "remove_vanished": true, "verified_only": false,
//                 "encrypted_only": false, "keep_protected": false,
//                 "resync_corrupt": false, "limit_rate": "50M", "jobs": 0}
//   }
//
// The server opens the source through a SyncSourceOpener the command line
// gives it (server/ does not include the client of a server); the rest is
// sync::RunSync into the local datastore.
//
// SyncScheduler starts each scheduled job when its time comes; a job whose
// datastore is busy with another task is retried every 30 s until it
// starts. Runs missed while the server was down are not made up.
//
// Thread safety: SyncJob is a value; SyncScheduler's methods may be called
// from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "base/mutex.h"
#include "base/status.h"
#include "datastore/datastore.h"
#include "server/schedule.h"
#include "sync/sync.h"

namespace cairn::server {

struct SyncJob {
  std::string name;   // [A-Za-z0-9._-]{1,64}
  std::string store;  // this server's datastore that receives the snapshots
  std::string from;   // the source: a path, https://HOST:PORT/STORE or s3://…
  std::string token;  // NAME:SECRET for a server source (a reader token is enough)
  std::string fingerprint;
  std::optional<Schedule> schedule;  // none: on demand only
  std::string ns;          // the source namespace ("" = the root)
  std::string target_ns;   // where that namespace lands on the target ("" = the root)
  int max_depth = -1;      // namespace levels below ns (-1 = all, 0 = ns only)
  std::vector<std::string> groups;        // sync::SyncOptions::selection
  std::vector<std::string> group_filter;  // sync::GroupFilter specs
  int transfer_last = 0;
  bool remove_vanished = false, verified_only = false, encrypted_only = false;
  bool keep_protected = false, resync_corrupt = false;
  std::string limit_rate;  // "50M"; "" = none
  int jobs = 0;            // reads in flight; 0 = adaptive

  // The job as the API and the task's "params" show it: every key but the
  // token's secret (its name is shown).
  nlohmann::json ToJson() const;
  // The sync options of a run (logger, progress, cancel left to the caller).
  sync::SyncOptions Options() const;
};

// Parses "sync_jobs" (an object: name → job). `stores`: the server's
// datastore names. InvalidArgument naming the job and the key for anything
// unknown, missing or malformed (a schedule, a group filter, a rate).
Result<std::vector<SyncJob>> ParseSyncJobs(const nlohmann::json& value,
                                           const std::map<std::string, std::string>& stores);

// Opens a job's source datastore. The pointer may own more (an env, a
// client) that lives as long as it.
using SyncSourceOpener =
    std::function<Result<std::shared_ptr<const datastore::Datastore>>(const SyncJob& job)>;

class TaskManager;

class SyncScheduler {
 public:
  // Starts a thread when some job has a schedule. `tasks` outlives this.
  SyncScheduler(TaskManager& tasks, Logger& logger, const std::vector<SyncJob>& jobs);
  ~SyncScheduler();  // stops and joins the thread

  // When job `name` runs next (Unix seconds); 0: not scheduled.
  int64_t NextRun(const std::string& name);

 private:
  void Loop(std::stop_token stop);

  TaskManager& tasks_;
  Logger& logger_;
  Mutex mu_;
  std::condition_variable_any wake_;
  std::map<std::string, std::pair<Schedule, int64_t>> due_ GUARDED_BY(mu_);  // name → schedule, next run
  std::jthread thread_;
};

}  // namespace cairn::server
