// Server-side tasks of `cairn serve` (docs/SERVER.md, "Server-side verify and
// tasks"): a verify or a gc of one datastore, run in a background thread
// exactly as a local `cairn verify` (quarantine, verify state recorded with
// each snapshot, the ledger) or `cairn gc` would run it, or a sync job
// (server/sync_jobs.h) pulling into one, with its progress, outcome and a
// log.
//
// Each task is persisted as STATE_DIR/tasks/ID.json (status, rewritten
// atomically at start and end) and ID.log (timestamped lines, appended as
// they happen). A task found "running" on disk when the manager starts was
// cut off by a stopped server and is marked error. At most one task (verify
// or gc) runs per datastore, so a gc never removes a chunk under a verify's
// feet. Stop() cancels the running verifies (verify's cancel hook: no
// further chunk starts, the rest is left to the next run of the same scope,
// which resumes it) and joins every task; a gc has no cancel hook and runs
// to its end (it is short next to a verify: one stat per chunk).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "maintenance/gc.h"
#include "server/scrub.h"
#include "server/sync_jobs.h"
#include "verify/verify.h"

namespace cairn::server {

enum class TaskState { kRunning, kOk, kFailed, kError };
// "running", "ok", "failed" (damage found), "error" (could not run, or cut off).
std::string_view TaskStateName(TaskState state);

// The scope and options of a verify task: the JSON body of
// POST /api/v1/stores/S/verify, every key optional.
struct VerifyTaskParams {
  std::string ns;        // "ns"
  std::string snapshot;  // "snapshot": "" = all, "vm/100" = a group, else a snapshot
  double outdated_after_days = 0;  // "outdated_after_days"
  int64_t max_duration_s = 0;      // "max_duration_s"
  double budget_percent = 0;       // "budget_percent" (0–100)
  int cover_days = 0;              // "cover_days" (1–36500)
  std::string order = "auto";      // "order": auto, id, inode

  // InvalidArgument naming the key for an unknown key or a bad value.
  static Result<VerifyTaskParams> FromJson(const nlohmann::json& body);
  nlohmann::json ToJson() const;
};

// The options of a gc task: the JSON body of POST /api/v1/stores/S/gc, every
// key optional.
struct GcTaskParams {
  bool dry_run = false;  // "dry_run"
  int64_t grace_s = 300;  // "grace_s": unreferenced chunks used this recently stay
  int threads = 0;        // "threads": 0 = the server's default (maintenance::GcOptions)

  // InvalidArgument naming the key for an unknown key or a bad value.
  static Result<GcTaskParams> FromJson(const nlohmann::json& body);
  nlohmann::json ToJson() const;
};

// The status of a task, as GET /api/v1/tasks/ID answers it (ToJson).
struct TaskInfo {
  std::string id;  // 32 hex digits
  std::string kind = "verify";  // "verify", "gc" or "sync"
  std::string job;              // kind sync: the sync job's name
  std::string store;
  std::string token;  // the name of the token that started it
  TaskState state = TaskState::kRunning;
  std::string error;   // kError: why
  int64_t started = 0;  // unix seconds
  int64_t ended = 0;    // 0 while running
  VerifyTaskParams params;  // kind verify ("params" in the JSON)
  GcTaskParams gc_params;   // kind gc ("params" in the JSON)
  nlohmann::json sync_params;  // kind sync: the job (SyncJob::ToJson, "params")
  std::string phase;  // the verify pipeline's phase ("" before it starts)
  uint64_t done_bytes = 0, total_bytes = 0;
  // As the local verify prints them, once the task has ended:
  // "verified X/Y MiB in T s, speed …/… MiB/s (N errors)" and "N snapshots: all ok".
  std::string summary;
  std::string result;
  uint64_t problems = 0;
  // The first kMaxProblemDetails problems (the log has them all).
  nlohmann::json problem_details = nlohmann::json::array();
  // gc, once ended ok: the report as `cairn gc --json` prints it
  // (maintenance::GcReportJson); sync, once ended: as `cairn sync --json`
  // (sync::SyncReportJson); null otherwise.
  nlohmann::json report;
  // What limits the task (pipeline::BottleneckJson): while it runs, from
  // its start until now; once ended, the whole run. Null before anything
  // was measured (and in tasks of older servers).
  nlohmann::json bottleneck;

  nlohmann::json ToJson() const;
  static Result<TaskInfo> FromJson(const nlohmann::json& j);
};

inline constexpr size_t kMaxProblemDetails = 100;

class TaskManager {
 public:
  // `stores`: name → datastore, outliving the manager. `state_dir`: tasks
  // go to STATE_DIR/tasks (made when missing, mode 0700; the files 0600).
  // `scrubber` (may be null; outlives the manager): what a task's log and
  // status show instead of the server's paths (they are shown to clients).
  TaskManager(Env& env, Logger& logger, std::string state_dir,
              const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores,
              const PathScrubber* scrubber = nullptr);
  ~TaskManager();  // Stop()

  // Marks tasks left "running" by a previous process as error. The
  // constructor calls it (logging a failure); an empty state_dir keeps no
  // tasks (StartVerify: FailedPrecondition).
  Status Recover();

  struct Started {
    std::string id;
    // A task was running on this store already: `id` and `kind` are its.
    bool already_running = false;
    std::string kind;
  };
  // Checks the scope (NotFound / InvalidArgument at once, as `cairn verify`
  // would) and starts the task. Unavailable after Stop().
  Result<Started> StartVerify(const std::string& store, const std::string& token,
                              const VerifyTaskParams& params);
  // Starts a gc of `store` (maintenance::RunGc), as StartVerify.
  Result<Started> StartGc(const std::string& store, const std::string& token,
                          const GcTaskParams& params);

  // The sync jobs this manager runs, and how it opens their sources. Call
  // once, before any StartSync.
  void SetSyncJobs(std::vector<SyncJob> jobs, SyncSourceOpener opener);
  const std::vector<SyncJob>& sync_jobs() const { return sync_jobs_; }
  // Starts sync job `job` (sync::RunSync from its source into its
  // datastore). NotFound for a job this server does not have, or (with
  // `store` set) one that does not pull into `store`.
  Result<Started> StartSync(const std::string& job, const std::string& token,
                            const std::string& store = "");
  // The newest task of sync job `job` (its last result), if any.
  std::optional<TaskInfo> LastSync(const std::string& job);

  // NotFound for an unknown or malformed id.
  Result<TaskInfo> Get(const std::string& id);
  // Log lines from line `since` (0-based) on, and the total line count.
  Result<std::vector<std::string>> Log(const std::string& id, size_t since, size_t* total);
  // Every task, newest first.
  std::vector<TaskInfo> List();

  // Cancels the running tasks and waits for them (they record state
  // "error" with the reason); later StartVerify calls are refused.
  void Stop();

  // For tests: every chunk read of a verify task started later sleeps
  // `micros` first (store::InjectingSource), one read at a time, so a test
  // can watch it run for chunks × micros.
  void SetReadLatencyForTest(int64_t micros) { read_latency_us_ = micros; }

  // For tests: waits until task `id` is no longer running (true) or the
  // timeout passes (false).
  bool WaitForTest(const std::string& id, int64_t timeout_ms);

  struct Task;

 private:
  // The part StartVerify and StartGc share: one task per store, the status
  // and log files, the first log line, then `run` on a thread of its own.
  Result<Started> Launch(TaskInfo info, const std::string& first_line,
                         std::function<void(Task&)> run);
  void RunVerify(Task& task, std::vector<datastore::SnapshotRef> snapshots);
  void Finish(Task& task, const Result<verify::VerifyReport>& report);
  void RunGc(Task& task);
  void FinishGc(Task& task, const Result<maintenance::GcReport>& report);
  void RunSync(Task& task, const SyncJob& job);
  void FinishSync(Task& task, const Result<sync::SyncReport>& report);
  void AppendLog(Task& task, std::string_view line);
  Status Persist(const TaskInfo& info);
  std::string TaskPath(const std::string& id, std::string_view ext) const;
  TaskInfo Snapshot(const Task& task);
  std::string Clean(std::string_view text) const {
    return scrubber_ == nullptr ? std::string(text) : scrubber_->Scrub(text);
  }

  Env& env_;
  Logger& logger_;
  const std::string dir_;
  const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores_;
  const PathScrubber* const scrubber_;
  std::atomic<int64_t> read_latency_us_{0};
  std::mutex mu_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Task>> live_;   // id → task with a thread
  std::map<std::string, std::string> running_by_store_;  // store → id
  std::vector<SyncJob> sync_jobs_;  // set once, before tasks start
  SyncSourceOpener open_sync_source_;
};

// True for 32 lowercase hex digits (a task id; nothing else reaches a path).
bool IsTaskId(std::string_view id);

}  // namespace cairn::server
