// cairn task show -r https://HOST:PORT/STORE ID [--follow] [--log] [--json]
// cairn task list -r https://HOST:PORT/STORE [--json]
// cairn sync-job list -r https://HOST:PORT/STORE [--json]
// cairn sync-job run -r https://HOST:PORT/STORE JOB [--detach] [--json]
#include "cli/cmd_task.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "cli/progress_bar.h"
#include "remote/remote_api.h"
#include "pipeline/progress.h"

namespace cairn::cli {

using nlohmann::json;

Result<std::string> StartServerTask(const ServerTarget& target, std::string_view kind,
                                    const json& options, bool* already_running) {
  remote::RemoteClient client(target.url, target.credentials);
  return remote::StartTask(client, kind, options, already_running);
}

namespace {

// Prints the log lines from `*since` on; advances it.
Status PrintLog(remote::RemoteClient& client, const std::string& id, size_t* since) {
  CAIRN_ASSIGN_OR_RETURN(Bytes body, remote::GetTaskLog(client, id, *since));
  std::string_view text = AsStringView(body);
  for (char c : text) *since += c == '\n';
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return Status::Ok();
}

uint64_t U64(const json& j, const char* a, const char* b) {
  if (!j.contains(a) || !j[a].is_object() || !j[a].contains(b) || !j[a][b].is_number_unsigned()) {
    return 0;
  }
  return j[a][b].get<uint64_t>();
}

std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

}  // namespace

Result<json> FollowTask(remote::RemoteClient& client, const std::string& id, bool print_log) {
  pipeline::Progress progress;
  const bool terminal = ProgressBar::StderrIsTerminal();
  std::unique_ptr<ProgressBar> bar;
  if (terminal && !print_log) bar = std::make_unique<ProgressBar>(progress, stderr, true);
  size_t since = 0;
  auto last_line = std::chrono::steady_clock::now();
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(json task, remote::GetTask(client, id));
    if (print_log) CAIRN_RETURN_IF_ERROR(PrintLog(client, id, &since));
    const uint64_t done = U64(task, "progress", "done_bytes");
    const uint64_t total = U64(task, "progress", "total_bytes");
    // A phase name outlives the call: the bar keeps the pointer.
    const std::string kind = task.value("kind", "");
    const char* phase = kind == "gc" ? "gc" : kind == "sync" ? "sync" : "verify";
    if (total != progress.total_bytes.load()) progress.StartPhase(phase, total);
    progress.done_bytes.store(done);
    if (task["state"] != "running") return task;
    auto now = std::chrono::steady_clock::now();
    if (!terminal && !print_log && now - last_line >= std::chrono::seconds(5)) {
      last_line = now;
      if (total > 0) {
        fmt::print(stderr, "cairn: task {}: {} {} of {} ({:.0f}%)\n", id, phase, HumanBytes(done),
                   HumanBytes(total), 100.0 * static_cast<double>(done) / total);
      } else {
        fmt::print(stderr, "cairn: task {}: {} running\n", id, phase);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

std::optional<json> RunServerTask(Context& ctx, const ServerTarget& target, std::string_view kind,
                                  const json& options, bool detach) {
  bool already_running = false;
  auto id = StartServerTask(target, kind, options, &already_running);
  if (!id.ok()) {
    Fail(ctx, id.status());
    return std::nullopt;
  }
  if (already_running) {
    fmt::print(stderr, "cairn: a {} of {} is already running on the server (task {}); {}\n", kind,
               target.url.ToString(), *id, detach ? "not starting another" : "following it");
  }
  if (detach) {
    if (ctx.json) {
      PrintJson({{"task", *id}, {"already_running", already_running}});
    } else {
      fmt::print("{}\n", *id);
    }
    return std::nullopt;
  }
  if (!already_running) fmt::print(stderr, "cairn: {} task {} started on the server\n", kind, *id);
  remote::RemoteClient client(target.url, target.credentials);
  auto task = FollowTask(client, *id, /*print_log=*/false);
  if (!task.ok()) {
    Fail(ctx, task.status());
    return std::nullopt;
  }
  return *task;
}

void PrintTaskOutcome(Context& ctx, const json& task) {
  const std::string state = Str(task, "state");
  if (ctx.json) {
    PrintJson(task);
  } else {
    const json& details = task.contains("problem_details") ? task["problem_details"] : json();
    size_t shown = 0;
    if (details.is_array()) {
      for (const json& p : details) {
        ++shown;
        fmt::print("BAD {}: {}\n", Str(p, "what"), Str(p, "error"));
        if (p.contains("affected") && p["affected"].is_array()) {
          for (const json& a : p["affected"]) {
            if (a.is_string()) fmt::print("    needed by {}\n", a.get<std::string>());
          }
        }
      }
    }
    uint64_t problems = task.contains("problems") && task["problems"].is_number_unsigned()
                            ? task["problems"].get<uint64_t>()
                            : 0;
    if (problems > shown) {
      fmt::print("… and {} more problems: cairn task show --log {}\n", problems - shown,
                 Str(task, "id"));
    }
    if (!Str(task, "result").empty()) fmt::print("{}\n", Str(task, "result"));
    if (!Str(task, "summary").empty()) fmt::print("{}\n", Str(task, "summary"));
  }
  if (state == "failed") {
    ctx.exit_code = kExitCorruption;
  } else if (state == "error") {
    Fail(ctx, UnknownError(fmt::format("task {} on the server: {}", Str(task, "id"),
                                       Str(task, "error"))));
    ctx.exit_code = kExitFailure;
  }
}

namespace {

struct ShowArgs {
  std::string id;
  bool follow = false;
  bool log = false;
};

void PrintTask(const json& t) {
  fmt::print("task      {}\n", Str(t, "id"));
  fmt::print("kind      {}\n", Str(t, "kind"));
  fmt::print("store     {}\n", Str(t, "store"));
  fmt::print("token     {}\n", Str(t, "token"));
  fmt::print("state     {}{}\n", Str(t, "state"),
             Str(t, "error").empty() ? "" : ": " + Str(t, "error"));
  fmt::print("started   {}\n", Str(t, "started_at"));
  if (Str(t, "kind") == "sync") fmt::print("job       {}\n", Str(t, "job"));
  if (Str(t, "kind") == "verify" && t.contains("params") && t["params"].is_object()) {
    const json& p = t["params"];
    std::string scope = Str(p, "snapshot").empty() ? "everything" : Str(p, "snapshot");
    if (!Str(p, "ns").empty()) scope = "ns " + Str(p, "ns") + " " + scope;
    fmt::print("scope     {}\n", scope);
  }
  const uint64_t done = U64(t, "progress", "done_bytes");
  const uint64_t total = U64(t, "progress", "total_bytes");
  fmt::print("progress  {} of {}\n", HumanBytes(done), HumanBytes(total));
}

void Show(Context& ctx, const ShowArgs& args) {
  auto target = ServerTargetFor(ctx);
  if (!target.ok()) return Fail(ctx, target.status());
  remote::RemoteClient client(target->url, target->credentials);
  if (args.follow) {
    auto task = FollowTask(client, args.id, args.log);
    if (!task.ok()) return Fail(ctx, task.status());
    return PrintTaskOutcome(ctx, *task);
  }
  auto task = remote::GetTask(client, args.id);
  if (!task.ok()) return Fail(ctx, task.status());
  if (ctx.json) {
    PrintJson(*task);
  } else {
    if (args.log) {
      size_t since = 0;
      if (Status s = PrintLog(client, args.id, &since); !s.ok()) return Fail(ctx, s);
    } else {
      PrintTask(*task);
      if (!Str(*task, "result").empty()) fmt::print("result    {}\n", Str(*task, "result"));
      if (!Str(*task, "summary").empty()) fmt::print("summary   {}\n", Str(*task, "summary"));
    }
  }
  const std::string state = Str(*task, "state");
  if (state == "failed") ctx.exit_code = kExitCorruption;
  if (state == "error") ctx.exit_code = kExitFailure;
}

void List(Context& ctx) {
  auto target = ServerTargetFor(ctx);
  if (!target.ok()) return Fail(ctx, target.status());
  remote::RemoteClient client(target->url, target->credentials);
  auto list = remote::ListTasks(client);
  if (!list.ok()) return Fail(ctx, list.status());
  const json& j = *list;
  if (ctx.json) return PrintJson(j);
  for (const json& t : j["tasks"]) {
    fmt::print("{}  {}  {:<7}  {:<8}  {}  {}\n", Str(t, "id"), Str(t, "started_at"),
               Str(t, "kind"), Str(t, "state"), Str(t, "store"),
               Str(t, "summary").empty() ? Str(t, "error") : Str(t, "summary"));
  }
}

struct SyncJobArgs {
  std::string job;
  bool detach = false;
};

void ListSyncJobs(Context& ctx) {
  auto answer = CallStore(ctx, "GET", "sync-jobs", ByteSpan());
  if (!answer.ok()) return Fail(ctx, answer.status());
  const json& j = *answer;
  if (ctx.json) return PrintJson(j);
  if (!j.contains("jobs") || !j["jobs"].is_array()) {
    return Fail(ctx, DataLossError("malformed answer to GET sync-jobs"));
  }
  for (const json& job : j["jobs"]) {
    std::string last = "never run";
    if (job.contains("last") && job["last"].is_object()) {
      const json& l = job["last"];
      last = fmt::format("{} {} (task {}){}", Str(l, "state"), Str(l, "started_at"), Str(l, "task"),
                         Str(l, "summary").empty() ? (Str(l, "error").empty() ? "" : ": " + Str(l, "error"))
                                                   : ": " + Str(l, "summary"));
    }
    fmt::print("{}  from {}  schedule {}  next {}\n    last: {}\n", Str(job, "name"),
               Str(job, "from"), Str(job, "schedule").empty() ? "-" : Str(job, "schedule"),
               Str(job, "next_run").empty() ? "-" : Str(job, "next_run"), last);
  }
}

void RunSyncJob(Context& ctx, const SyncJobArgs& args) {
  auto target = ServerTargetFor(ctx);
  if (!target.ok()) return Fail(ctx, target.status());
  auto task = RunServerTask(ctx, *target, "sync", json{{"job", args.job}}, args.detach);
  if (task) PrintTaskOutcome(ctx, *task);
}

}  // namespace

void RegisterSyncJob(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "sync-job", "the sync jobs of a cairn server: list them, or run one now (admin token)");
  cmd->require_subcommand(1);
  auto* list = cmd->add_subcommand(
      "list", "the sync jobs into a datastore: source, schedule, next run, last result");
  AddRepoOptions(list, ctx);
  AddJsonOption(list, ctx);
  list->callback([&ctx] { ListSyncJobs(ctx); });
  auto args = std::make_shared<SyncJobArgs>();
  auto* run = cmd->add_subcommand(
      "run", "start a sync job now as a server task and follow it (exit 0 ok, 3 damage, 1 error)");
  AddRepoOptions(run, ctx);
  AddJsonOption(run, ctx);
  run->add_option("JOB", args->job, "the job's name in the server's \"sync_jobs\"")->required();
  run->add_flag("--detach", args->detach, "print the task id and return at once");
  run->callback([&ctx, args] { RunSyncJob(ctx, *args); });
}

void RegisterTask(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "task", "show tasks running on a cairn server (verify --on-server, gc, sync jobs)");
  cmd->require_subcommand(1);
  auto args = std::make_shared<ShowArgs>();
  auto* show = cmd->add_subcommand("show", "show a task's status, or follow it to its end");
  AddRepoOptions(show, ctx);
  AddJsonOption(show, ctx);
  show->add_option("ID", args->id, "the task id (printed by verify --on-server --detach)")
      ->required();
  show->add_flag("--follow", args->follow,
                 "wait for the task to end, showing its progress; exit like verify "
                 "(0 ok, 3 damage found, 1 error)");
  show->add_flag("--log", args->log, "print the task's log (with --follow: as it grows)");
  show->callback([&ctx, args] { Show(ctx, *args); });
  auto* list = cmd->add_subcommand("list", "list the tasks this token may see (admin: all)");
  AddRepoOptions(list, ctx);
  AddJsonOption(list, ctx);
  list->callback([&ctx] { List(ctx); });
}

}  // namespace cairn::cli
