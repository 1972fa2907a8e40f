#include "server/tasks.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <thread>

#include <fmt/format.h>

#include "crypto/crypt_config.h"
#include "pipeline/bottleneck_json.h"
#include "pipeline/progress.h"
#include "store/injecting_source.h"
#include "verify/verify.h"
#include "verify/verify_report.h"

namespace cairn::server {

using nlohmann::json;

namespace {

constexpr char kTasksDir[] = "tasks";
constexpr uint64_t kMaxStatusFile = 16 << 20;
constexpr uint64_t kMaxLogFile = uint64_t{1} << 30;

Result<TaskState> ParseState(std::string_view s) {
  if (s == "running") return TaskState::kRunning;
  if (s == "ok") return TaskState::kOk;
  if (s == "failed") return TaskState::kFailed;
  if (s == "error") return TaskState::kError;
  return InvalidArgumentError(fmt::format("unknown task state '{}'", s));
}

}  // namespace

std::string_view TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kRunning: return "running";
    case TaskState::kOk: return "ok";
    case TaskState::kFailed: return "failed";
    case TaskState::kError: return "error";
  }
  return "?";
}

bool IsTaskId(std::string_view id) {
  if (id.size() != 32) return false;
  return std::all_of(id.begin(), id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// --- VerifyTaskParams ------------------------------------------------------

Result<VerifyTaskParams> VerifyTaskParams::FromJson(const json& body) {
  VerifyTaskParams p;
  if (body.is_null()) return p;
  if (!body.is_object()) return InvalidArgumentError("the verify options must be a JSON object");
  for (const auto& item : body.items()) {
    // Named copies: clang does not let a lambda capture structured bindings.
    const std::string key = item.key();
    const json& value = item.value();
    auto bad = [&](std::string_view want) {
      return InvalidArgumentError(fmt::format("verify option \"{}\": expected {}", key, want));
    };
    if (key == "ns" || key == "snapshot" || key == "order") {
      if (!value.is_string()) return bad("a string");
      std::string v = value.get<std::string>();
      if (key == "ns") p.ns = v;
      else if (key == "snapshot") p.snapshot = v;
      else {
        if (v != "auto" && v != "id" && v != "inode") return bad("auto, id or inode");
        p.order = v;
      }
    } else if (key == "outdated_after_days" || key == "budget_percent") {
      if (!value.is_number()) return bad("a number");
      double v = value.get<double>();
      if (key == "outdated_after_days") {
        if (!(v >= 0 && v <= 36500)) return bad("0 to 36500 days");
        p.outdated_after_days = v;
      } else {
        if (!(v >= 0 && v <= 100)) return bad("0 to 100 percent");
        p.budget_percent = v;
      }
    } else if (key == "max_duration_s" || key == "cover_days") {
      if (!value.is_number_integer()) return bad("an integer");
      int64_t v = value.get<int64_t>();
      if (key == "max_duration_s") {
        if (v < 0 || v > int64_t{366} * 86400) return bad("0 to 31622400 seconds");
        p.max_duration_s = v;
      } else {
        if (v < 0 || v > 36500) return bad("0 to 36500 days");
        p.cover_days = static_cast<int>(v);
      }
    } else {
      return InvalidArgumentError(fmt::format(
          "unknown verify option \"{}\" (known: ns, snapshot, outdated_after_days, "
          "max_duration_s, budget_percent, cover_days, order)",
          key));
    }
  }
  return p;
}

json VerifyTaskParams::ToJson() const {
  return {{"ns", ns},
          {"snapshot", snapshot},
          {"outdated_after_days", outdated_after_days},
          {"max_duration_s", max_duration_s},
          {"budget_percent", budget_percent},
          {"cover_days", cover_days},
          {"order", order}};
}

// --- GcTaskParams ----------------------------------------------------------

Result<GcTaskParams> GcTaskParams::FromJson(const json& body) {
  GcTaskParams p;
  if (body.is_null()) return p;
  if (!body.is_object()) return InvalidArgumentError("the gc options must be a JSON object");
  for (const auto& item : body.items()) {
    const std::string key = item.key();
    const json& value = item.value();
    auto bad = [&](std::string_view want) {
      return InvalidArgumentError(fmt::format("gc option \"{}\": expected {}", key, want));
    };
    if (key == "dry_run") {
      if (!value.is_boolean()) return bad("true or false");
      p.dry_run = value.get<bool>();
    } else if (key == "grace_s" || key == "threads") {
      if (!value.is_number_integer()) return bad("an integer");
      int64_t v = value.get<int64_t>();
      if (key == "grace_s") {
        if (v < 0 || v > int64_t{366} * 86400) return bad("0 to 31622400 seconds");
        p.grace_s = v;
      } else {
        if (v < 0 || v > 256) return bad("0 to 256 threads");
        p.threads = static_cast<int>(v);
      }
    } else {
      return InvalidArgumentError(
          fmt::format("unknown gc option \"{}\" (known: dry_run, grace_s, threads)", key));
    }
  }
  return p;
}

json GcTaskParams::ToJson() const {
  return {{"dry_run", dry_run}, {"grace_s", grace_s}, {"threads", threads}};
}

// --- TaskInfo --------------------------------------------------------------

json TaskInfo::ToJson() const {
  json params_json = kind == "gc" ? gc_params.ToJson()
                     : kind == "sync" ? (sync_params.is_null() ? json::object() : sync_params)
                                      : params.ToJson();
  json j = {{"id", id},
            {"kind", kind},
            {"store", store},
            {"token", token},
            {"state", TaskStateName(state)},
            {"started", started},
            {"started_at", datastore::FormatRfc3339(started)},
            {"ended", ended > 0 ? json(ended) : json(nullptr)},
            {"params", std::move(params_json)},
            {"progress", {{"phase", phase}, {"done_bytes", done_bytes}, {"total_bytes", total_bytes}}},
            {"summary", summary},
            {"result", result},
            {"problems", problems},
            {"problem_details", problem_details}};
  if (!error.empty()) j["error"] = error;
  if (!report.is_null()) j["report"] = report;
  if (kind == "sync") j["job"] = job;
  if (!bottleneck.is_null()) j["bottleneck"] = bottleneck;
  return j;
}

Result<TaskInfo> TaskInfo::FromJson(const json& j) {
  try {
    TaskInfo t;
    t.id = j.at("id").get<std::string>();
    t.kind = j.at("kind").get<std::string>();
    t.store = j.at("store").get<std::string>();
    t.token = j.at("token").get<std::string>();
    CAIRN_ASSIGN_OR_RETURN(t.state, ParseState(j.at("state").get<std::string>()));
    if (j.contains("error")) t.error = j["error"].get<std::string>();
    t.started = j.at("started").get<int64_t>();
    t.ended = j.at("ended").is_null() ? 0 : j["ended"].get<int64_t>();
    if (t.kind == "gc") {
      CAIRN_ASSIGN_OR_RETURN(t.gc_params, GcTaskParams::FromJson(j.at("params")));
    } else if (t.kind == "sync") {
      t.sync_params = j.at("params");
      t.job = j.at("job").get<std::string>();
    } else {
      CAIRN_ASSIGN_OR_RETURN(t.params, VerifyTaskParams::FromJson(j.at("params")));
    }
    if (j.contains("report")) t.report = j["report"];
    if (j.contains("bottleneck") && j["bottleneck"].is_object()) t.bottleneck = j["bottleneck"];
    const json& p = j.at("progress");
    t.phase = p.at("phase").get<std::string>();
    t.done_bytes = p.at("done_bytes").get<uint64_t>();
    t.total_bytes = p.at("total_bytes").get<uint64_t>();
    t.summary = j.at("summary").get<std::string>();
    t.result = j.at("result").get<std::string>();
    t.problems = j.at("problems").get<uint64_t>();
    t.problem_details = j.at("problem_details");
    return t;
  } catch (const json::exception& e) {
    return DataLossError(fmt::format("malformed task status: {}", e.what()));
  }
}

// --- TaskManager -----------------------------------------------------------

struct TaskManager::Task {
  std::mutex mu;  // guards info and log
  TaskInfo info;
  std::unique_ptr<WritableFile> log;
  size_t log_lines = 0;
  pipeline::Progress progress;
  std::atomic<bool> cancel{false};
  std::atomic<bool> exited{false};  // RunTask returned (or is about to): join cannot wait
  std::thread thread;
  std::condition_variable done;
};

namespace {

// Task files hold what clients may read, and the store's layout: the
// tasks directory is 0700, its files 0600, whatever the umask.
Status MakePrivate(const std::string& path, mode_t mode) {
  if (::chmod(path.c_str(), mode) != 0) {
    return ErrnoToStatus(errno, fmt::format("chmod {:o} {}", mode, path));
  }
  return Status::Ok();
}

// Forwards verify's messages to the server log, tagged with the task, and
// keeps warnings and errors in the task's log.
class TaskLogger : public Logger {
 public:
  TaskLogger(Logger& server, std::string tag, std::function<void(std::string_view)> keep)
      : server_(server), tag_(std::move(tag)), keep_(std::move(keep)) {}
  void Log(LogLevel level, std::string_view message) override {
    if (server_.Enabled(level)) server_.Log(level, fmt::format("{}: {}", tag_, message));
    if (level >= LogLevel::kWarning) {
      keep_(fmt::format("{}: {}", level == LogLevel::kWarning ? "warning" : "error", message));
    }
  }
  bool Enabled(LogLevel level) const override {
    return level >= LogLevel::kWarning || server_.Enabled(level);
  }

 private:
  Logger& server_;
  std::string tag_;
  std::function<void(std::string_view)> keep_;
};

}  // namespace

TaskManager::TaskManager(Env& env, Logger& logger, std::string state_dir,
                         const std::map<std::string, std::unique_ptr<datastore::Datastore>>& stores,
                         const PathScrubber* scrubber)
    : env_(env), logger_(logger),
      dir_(state_dir.empty() ? std::string() : JoinPath(state_dir, kTasksDir)), stores_(stores),
      scrubber_(scrubber) {
  if (dir_.empty()) return;  // no state directory: no tasks
  if (Status s = Recover(); !s.ok()) logger_.Warn("server tasks: {}", s.message());
}

TaskManager::~TaskManager() { Stop(); }

std::string TaskManager::TaskPath(const std::string& id, std::string_view ext) const {
  return JoinPath(dir_, id + std::string(ext));
}

Status TaskManager::Persist(const TaskInfo& info) {
  std::string text =
      info.ToJson().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const std::string path = TaskPath(info.id, ".json");
  CAIRN_RETURN_IF_ERROR(
      WriteFileAtomic(env_, path, AsBytes(text)).WithContext(fmt::format("task {}", info.id)));
  return MakePrivate(path, 0600);
}

void TaskManager::AppendLog(Task& task, std::string_view line) {
  // Held by the caller: task.mu.
  std::string text =
      fmt::format("{} {}\n", datastore::FormatRfc3339(env_.NowUnixSeconds()), Clean(line));
  ++task.log_lines;
  if (task.log != nullptr) {
    if (Status s = task.log->Append(AsBytes(text)); !s.ok()) {
      logger_.Warn("task {}: log: {}", task.info.id, s.message());
    }
  }
}

Status TaskManager::Recover() {
  if (dir_.empty()) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(CreateDirs(env_, dir_).WithContext("tasks directory"));
  CAIRN_RETURN_IF_ERROR(MakePrivate(dir_, 0700));
  CAIRN_ASSIGN_OR_RETURN(auto names, env_.ListDir(dir_));
  for (const std::string& name : names) {
    if (!name.ends_with(".json") || !IsTaskId(name.substr(0, name.size() - 5))) continue;
    std::string id = name.substr(0, name.size() - 5);
    auto data = ReadWholeFile(env_, TaskPath(id, ".json"), kMaxStatusFile);
    if (!data.ok()) continue;
    auto parsed = json::parse(AsStringView(*data), nullptr, false);
    auto info = TaskInfo::FromJson(parsed);
    if (!info.ok()) {
      logger_.Warn("task {}: {}", id, info.status().message());
      continue;
    }
    if (info->state != TaskState::kRunning) continue;
    info->state = TaskState::kError;
    info->error = "the server stopped during the task";
    info->ended = env_.NowUnixSeconds();
    if (Status s = Persist(*info); !s.ok()) logger_.Warn("{}", s.message());
    Task t;
    auto log = env_.OpenWritable(TaskPath(id, ".log"), OpenMode::kAppend);
    if (log.ok()) t.log = std::move(*log);
    t.info = *info;
    {
      std::lock_guard lock(t.mu);
      AppendLog(t, "error: the server stopped during the task");
    }
    if (t.log) t.log->Close().IgnoreError();
    logger_.Info("task {} ({} of {}) was cut off by a server stop: marked error", id,
                 info->kind, info->store);
  }
  return Status::Ok();
}

Result<TaskManager::Started> TaskManager::Launch(TaskInfo info, const std::string& first_line,
                                                 std::function<void(Task&)> run) {
  const std::string store = info.store;
  if (dir_.empty()) return FailedPreconditionError("the server has no state directory for tasks");
  std::unique_lock lock(mu_);
  if (stopping_) return UnavailableError("the server is stopping");
  if (auto r = running_by_store_.find(store); r != running_by_store_.end()) {
    // Still running, or ended and about to leave running_by_store_.
    auto t = live_.find(r->second);
    if (t != live_.end()) {
      std::lock_guard tl(t->second->mu);
      if (t->second->info.state == TaskState::kRunning) {
        return Started{r->second, true, t->second->info.kind};
      }
    }
    running_by_store_.erase(r);
  }
  // Reap the threads of finished tasks.
  for (auto t = live_.begin(); t != live_.end();) {
    if (t->second->exited.load() && t->second->thread.joinable()) {
      t->second->thread.join();
      t = live_.erase(t);
    } else {
      ++t;
    }
  }
  uint8_t raw[16];
  crypto::RandomBytes(raw);
  auto task = std::make_shared<Task>();
  info.id = ToHex(ByteSpan(raw, sizeof raw));
  info.started = env_.NowUnixSeconds();
  task->info = info;
  CAIRN_RETURN_IF_ERROR(CreateDirs(env_, dir_).WithContext("tasks directory"));
  CAIRN_RETURN_IF_ERROR(MakePrivate(dir_, 0700));
  CAIRN_ASSIGN_OR_RETURN(task->log,
                         env_.OpenWritable(TaskPath(info.id, ".log"), OpenMode::kAppend));
  CAIRN_RETURN_IF_ERROR(MakePrivate(TaskPath(info.id, ".log"), 0600));
  CAIRN_RETURN_IF_ERROR(Persist(info));
  {
    std::lock_guard tl(task->mu);
    AppendLog(*task, first_line);
  }
  logger_.Info("task {}: {} of datastore '{}' started by token '{}'", info.id, info.kind, store,
               info.token);
  live_[info.id] = task;
  running_by_store_[store] = info.id;
  task->thread = std::thread([this, task, run = std::move(run)] {
    run(*task);
    {
      // Not under task->mu: the lock order is mu_, then a task's mu.
      std::lock_guard m(mu_);
      auto it = running_by_store_.find(task->info.store);
      if (it != running_by_store_.end() && it->second == task->info.id) {
        running_by_store_.erase(it);
      }
    }
    task->exited.store(true);
    task->done.notify_all();
  });
  return Started{info.id, false, info.kind};
}

Result<TaskManager::Started> TaskManager::StartVerify(const std::string& store,
                                                      const std::string& token,
                                                      const VerifyTaskParams& params) {
  auto it = stores_.find(store);
  if (it == stores_.end()) return NotFoundError(fmt::format("no datastore named '{}'", store));
  CAIRN_ASSIGN_OR_RETURN(auto snapshots,
                         verify::SelectSnapshots(*it->second, params.ns, params.snapshot));
  TaskInfo info;
  info.kind = "verify";
  info.store = store;
  info.token = token;
  info.params = params;
  std::string line = fmt::format(
      "verify of datastore '{}' started by token '{}' (scope: {}{}{})", store, token,
      params.ns.empty() ? "" : "ns " + params.ns + " ",
      params.snapshot.empty() ? "everything" : params.snapshot,
      params.outdated_after_days > 0
          ? fmt::format(", outdated after {} days", params.outdated_after_days)
          : "");
  auto snaps = std::make_shared<std::vector<datastore::SnapshotRef>>(std::move(snapshots));
  return Launch(std::move(info), line,
                [this, snaps](Task& task) { RunVerify(task, std::move(*snaps)); });
}

Result<TaskManager::Started> TaskManager::StartGc(const std::string& store,
                                                  const std::string& token,
                                                  const GcTaskParams& params) {
  if (stores_.find(store) == stores_.end()) {
    return NotFoundError(fmt::format("no datastore named '{}'", store));
  }
  TaskInfo info;
  info.kind = "gc";
  info.store = store;
  info.token = token;
  info.gc_params = params;
  std::string line = fmt::format("gc of datastore '{}' started by token '{}' (grace {} s{})",
                                 store, token, params.grace_s, params.dry_run ? ", dry run" : "");
  return Launch(std::move(info), line, [this](Task& task) { RunGc(task); });
}

void TaskManager::SetSyncJobs(std::vector<SyncJob> jobs, SyncSourceOpener opener) {
  sync_jobs_ = std::move(jobs);
  open_sync_source_ = std::move(opener);
}

Result<TaskManager::Started> TaskManager::StartSync(const std::string& job_name,
                                                    const std::string& token,
                                                    const std::string& store) {
  auto job = std::find_if(sync_jobs_.begin(), sync_jobs_.end(),
                          [&](const SyncJob& j) { return j.name == job_name; });
  if (job == sync_jobs_.end() || (!store.empty() && job->store != store)) {
    return NotFoundError(fmt::format("no sync job '{}'{}", job_name,
                                     store.empty() ? "" : " into datastore '" + store + "'"));
  }
  if (!open_sync_source_) return FailedPreconditionError("this server runs no sync jobs");
  if (stores_.find(job->store) == stores_.end()) {
    return NotFoundError(fmt::format("no datastore named '{}'", job->store));
  }
  TaskInfo info;
  info.kind = "sync";
  info.job = job->name;
  info.store = job->store;
  info.token = token;
  info.sync_params = job->ToJson();
  std::string line = fmt::format("sync job '{}' into datastore '{}' started by {} (from {}{})",
                                 job->name, job->store,
                                 token == "(schedule)" ? "its schedule" : "token '" + token + "'",
                                 job->from, job->ns.empty() ? "" : ", ns " + job->ns);
  const SyncJob* j = &*job;
  return Launch(std::move(info), line, [this, j](Task& task) { RunSync(task, *j); });
}

std::optional<TaskInfo> TaskManager::LastSync(const std::string& job) {
  for (TaskInfo& t : List()) {  // newest first
    if (t.kind == "sync" && t.job == job) return std::move(t);
  }
  return std::nullopt;
}

void TaskManager::RunSync(Task& task, const SyncJob& job) {
  const std::string id = [&] {
    std::lock_guard lock(task.mu);
    return task.info.id;
  }();
  TaskLogger logger(logger_, "task " + id, [&](std::string_view line) {
    std::lock_guard lock(task.mu);
    AppendLog(task, line);
  });
  auto src = open_sync_source_(job);
  if (!src.ok()) {
    return FinishSync(task, src.status().WithContext(fmt::format("opening {}", job.from)));
  }
  sync::SyncOptions options = job.Options();
  options.logger = &logger;
  options.progress = &task.progress;
  options.cancel = &task.cancel;
  FinishSync(task, sync::RunSync(**src, *stores_.at(job.store), options));
}

void TaskManager::FinishSync(Task& task, const Result<sync::SyncReport>& report) {
  std::lock_guard lock(task.mu);
  TaskInfo& info = task.info;
  info.ended = env_.NowUnixSeconds();
  info.phase = task.progress.phase.load();
  info.done_bytes = task.progress.done_bytes.load();
  info.total_bytes = task.progress.total_bytes.load();
  if (!report.ok()) {
    // A chunk or file of the source that fails its check: damage, as a
    // verify's "failed"; anything else could not run.
    info.state =
        report.status().code() == StatusCode::kDataLoss ? TaskState::kFailed : TaskState::kError;
    info.error = Clean(report.status().message());
    AppendLog(task, fmt::format("error: {}", info.error));
  } else {
    info.state = TaskState::kOk;
    info.report = sync::SyncReportJson(*report);
    std::vector<std::string> lines = sync::SyncReportLines(*report, false);
    for (const std::string& line : lines) AppendLog(task, line);
    const pipeline::Bottleneck b = task.progress.stages.Analyze();
    if (b.measured) AppendLog(task, "bottleneck: " + b.Describe());
    info.summary = lines.empty() ? std::string() : lines.back();
    info.result = fmt::format("{} copied, {} already there, {} removed", report->copied,
                              report->present, report->removed);
  }
  AppendLog(task, fmt::format("sync ended: {}", TaskStateName(info.state)));
  if (Status s = Persist(info); !s.ok()) logger_.Warn("{}", s.message());
  if (task.log) task.log->Close().IgnoreError();
  logger_.Info("task {}: sync job '{}' into '{}' ended: {}{}", info.id, info.job, info.store,
               TaskStateName(info.state), info.summary.empty() ? "" : ", " + info.summary);
}

void TaskManager::RunVerify(Task& task, std::vector<datastore::SnapshotRef> snapshots) {
  const TaskInfo start = [&] {
    std::lock_guard lock(task.mu);
    return task.info;
  }();
  const VerifyTaskParams& p = start.params;
  const datastore::Datastore& store = *stores_.at(start.store);
  TaskLogger logger(logger_, "task " + start.id, [&](std::string_view line) {
    std::lock_guard lock(task.mu);
    AppendLog(task, line);
  });
  verify::VerifyOptions options;
  options.snapshots = std::move(snapshots);
  options.logger = &logger;
  options.progress = &task.progress;
  options.quarantine = true;
  options.record_state = true;
  options.use_ledger = true;
  options.outdated_after_s = static_cast<int64_t>(p.outdated_after_days * 86400);
  options.max_duration_ns = p.max_duration_s * 1'000'000'000;
  options.budget = p.budget_percent / 100;
  options.cover_days = p.cover_days;
  // The scope string of the local verify, so either resumes the other's run.
  options.scope = p.ns + "|" + p.snapshot;
  auto order = verify::ParseChunkOrder(p.order);
  options.order = order.ok() ? *order : verify::ChunkOrder::kAuto;
  options.cancel = &task.cancel;
  std::unique_ptr<store::InjectingSource> slow;
  if (const int64_t us = read_latency_us_.load(); us > 0) {
    slow = std::make_unique<store::InjectingSource>(store.source(),
                                                    store::InjectionOptions{.latency_us = us});
    options.source = slow.get();
    options.jobs = 1;  // one read at a time: the run lasts chunks × latency
  }
  Finish(task, verify::RunVerify(store, options));
}

void TaskManager::RunGc(Task& task) {
  const TaskInfo start = [&] {
    std::lock_guard lock(task.mu);
    return task.info;
  }();
  TaskLogger logger(logger_, "task " + start.id, [&](std::string_view line) {
    std::lock_guard lock(task.mu);
    AppendLog(task, line);
  });
  maintenance::GcOptions options;
  options.grace_seconds = start.gc_params.grace_s;
  options.threads = start.gc_params.threads;
  options.dry_run = start.gc_params.dry_run;
  options.logger = &logger;
  options.progress = &task.progress;
  task.progress.StartPhase("gc", 0);
  FinishGc(task, maintenance::RunGc(*stores_.at(start.store), options));
}

void TaskManager::FinishGc(Task& task, const Result<maintenance::GcReport>& report) {
  std::lock_guard lock(task.mu);
  TaskInfo& info = task.info;
  info.ended = env_.NowUnixSeconds();
  info.phase = task.progress.phase.load();
  info.bottleneck = pipeline::BottleneckJson(task.progress.stages.Analyze());
  if (!report.ok()) {
    info.state = TaskState::kError;
    info.error = Clean(report.status().message());
    AppendLog(task, fmt::format("error: {}", info.error));
  } else {
    const maintenance::GcReport& r = *report;
    info.state = TaskState::kOk;
    info.report = maintenance::GcReportJson(r);
    info.summary = fmt::format("{} {} chunks, {}; {} pending, {}",
                               r.dry_run ? "would remove" : "removed", r.removed_chunks,
                               HumanBytes(r.removed_bytes), r.pending_chunks,
                               HumanBytes(r.pending_bytes));
    AppendLog(task, fmt::format("marked {} chunks referenced by {} snapshots; swept {} chunk "
                                "files: {} in use",
                                r.referenced_chunks, r.snapshots, r.chunk_files,
                                r.in_use_chunks));
    AppendLog(task, info.summary);
  }
  AppendLog(task, fmt::format("gc ended: {}", TaskStateName(info.state)));
  if (Status s = Persist(info); !s.ok()) logger_.Warn("{}", s.message());
  if (task.log) task.log->Close().IgnoreError();
  logger_.Info("task {}: gc of '{}' ended: {}{}", info.id, info.store, TaskStateName(info.state),
               info.summary.empty() ? "" : ", " + info.summary);
}

void TaskManager::Finish(Task& t, const Result<verify::VerifyReport>& report) {
  Task* task = &t;
  const VerifyTaskParams& p = t.info.params;
  std::lock_guard lock(task->mu);
  TaskInfo& info = task->info;
  info.ended = env_.NowUnixSeconds();
  info.phase = task->progress.phase.load();
  info.done_bytes = task->progress.done_bytes.load();
  info.total_bytes = task->progress.total_bytes.load();
  info.bottleneck = pipeline::BottleneckJson(task->progress.stages.Analyze());
  const bool cancelled = task->cancel.load();
  if (!report.ok()) {
    info.state = TaskState::kError;
    info.error = Clean(report.status().message());
    AppendLog(*task, fmt::format("error: {}", info.error));
  } else {
    const verify::VerifyReport& r = *report;
    // The words of `cairn verify` (verify/verify_report.h), line by line.
    const verify::VerifyText text = verify::DescribeVerify(r, p.outdated_after_days);
    for (const std::string& line : text.problems) AppendLog(*task, line);
    for (const verify::Problem& pr : r.problems) {
      if (info.problem_details.size() >= kMaxProblemDetails) break;
      nlohmann::json affected = nlohmann::json::array();
      for (const std::string& a : pr.affected) affected.push_back(Clean(a));
      info.problem_details.push_back({{"what", Clean(pr.what)},
                                      {"error", Clean(pr.error)},
                                      {"missing", pr.missing},
                                      {"affected", std::move(affected)}});
    }
    if (!r.ledger_warning.empty()) AppendLog(*task, fmt::format("ledger: {}", r.ledger_warning));
    for (const std::string& line : text.notes) AppendLog(*task, line);
    info.problems = r.problems.size();
    info.result = text.result;
    info.summary = text.summary;
    if (!r.ok()) {
      info.state = TaskState::kFailed;
    } else if (cancelled && r.left_chunks > 0) {
      info.state = TaskState::kError;
      info.error = "cancelled: the server stopped during the task (the next verify of the same "
                   "scope resumes it)";
      AppendLog(*task, "error: " + info.error);
    } else {
      info.state = TaskState::kOk;
    }
    AppendLog(*task, info.result);
    AppendLog(*task, info.summary);
  }
  AppendLog(*task, fmt::format("verify ended: {}", TaskStateName(info.state)));
  if (Status s = Persist(info); !s.ok()) logger_.Warn("{}", s.message());
  if (task->log) task->log->Close().IgnoreError();
  logger_.Info("task {}: verify of '{}' ended: {}{}", info.id, info.store,
               TaskStateName(info.state), info.summary.empty() ? "" : ", " + info.summary);
}

TaskInfo TaskManager::Snapshot(const Task& task) {
  TaskInfo info = task.info;
  if (info.state == TaskState::kRunning) {
    info.phase = task.progress.phase.load();
    info.done_bytes = task.progress.done_bytes.load();
    info.total_bytes = task.progress.total_bytes.load();
    info.bottleneck = pipeline::BottleneckJson(task.progress.stages.Analyze());
  }
  return info;
}

Result<TaskInfo> TaskManager::Get(const std::string& id) {
  if (!IsTaskId(id)) return NotFoundError(fmt::format("no task '{}'", id));
  {
    std::shared_ptr<Task> task;
    {
      std::lock_guard lock(mu_);
      auto it = live_.find(id);
      if (it != live_.end()) task = it->second;
    }
    if (task) {
      std::lock_guard lock(task->mu);
      return Snapshot(*task);
    }
  }
  auto data = ReadWholeFile(env_, TaskPath(id, ".json"), kMaxStatusFile);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) {
      return NotFoundError(fmt::format("no task '{}'", id));
    }
    return data.status();
  }
  return TaskInfo::FromJson(json::parse(AsStringView(*data), nullptr, false));
}

Result<std::vector<std::string>> TaskManager::Log(const std::string& id, size_t since,
                                                  size_t* total) {
  if (!IsTaskId(id)) return NotFoundError(fmt::format("no task '{}'", id));
  auto data = ReadWholeFile(env_, TaskPath(id, ".log"), kMaxLogFile);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) {
      return NotFoundError(fmt::format("no task '{}'", id));
    }
    return data.status();
  }
  std::string_view text = AsStringView(*data);
  std::vector<std::string> lines;
  size_t n = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    if (nl == std::string_view::npos) break;  // a line being written: not yet
    if (n++ >= since) lines.emplace_back(text.substr(0, nl));
    text.remove_prefix(nl + 1);
  }
  *total = n;
  return lines;
}

std::vector<TaskInfo> TaskManager::List() {
  std::vector<TaskInfo> out;
  auto names = env_.ListDir(dir_);
  if (!names.ok()) return out;
  for (const std::string& name : *names) {
    if (!name.ends_with(".json")) continue;
    std::string id = name.substr(0, name.size() - 5);
    if (!IsTaskId(id)) continue;
    auto info = Get(id);
    if (info.ok()) out.push_back(std::move(*info));
  }
  std::sort(out.begin(), out.end(), [](const TaskInfo& a, const TaskInfo& b) {
    return a.started != b.started ? a.started > b.started : a.id < b.id;
  });
  return out;
}

void TaskManager::Stop() {
  std::map<std::string, std::shared_ptr<Task>> live;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    live.swap(live_);
  }
  for (auto& [id, task] : live) task->cancel.store(true);
  for (auto& [id, task] : live) {
    if (task->thread.joinable()) task->thread.join();
  }
}

bool TaskManager::WaitForTest(const std::string& id, int64_t timeout_ms) {
  std::shared_ptr<Task> task;
  {
    std::lock_guard lock(mu_);
    auto it = live_.find(id);
    if (it == live_.end()) return true;
    task = it->second;
  }
  std::unique_lock lock(task->mu);
  return task->done.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return task->info.state != TaskState::kRunning;
  });
}

}  // namespace cairn::server
