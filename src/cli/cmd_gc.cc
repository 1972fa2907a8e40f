// cairn gc -r REPO [--dry-run] [--grace DURATION] [--threads N] [--json]
// cairn gc -r https://HOST:PORT/STORE [--detach] [same options]
//
// On a server the gc runs there as a task (docs/SERVER.md, "Maintenance
// through the server"), like verify --on-server: this starts it, follows it
// and prints its report, which is the JSON a local `gc --json` prints; the
// human output is printed from that JSON either way.
#include <fmt/format.h>

#include <algorithm>

#include "base/fault_injection_env.h"
#include "cli/cli_util.h"
#include "cli/cmd_task.h"
#include "maintenance/gc.h"

namespace cairn::cli {
namespace {

using nlohmann::json;

struct GcArgs {
  bool dry_run = false;
  std::string grace = "5m";
  int threads = 0;
  bool detach = false;
  double inject_read_latency_ms = 0;  // hidden: slow index reads, for the bottleneck's tests
};

// A count (an int field such as "threads" is a signed JSON number).
uint64_t U64(const json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_integer()) return 0;
  return j[key].is_number_unsigned() ? j[key].get<uint64_t>()
                                     : static_cast<uint64_t>(std::max<int64_t>(0, j[key].get<int64_t>()));
}
double Seconds(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0;
}
std::string Str(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// A gc report (maintenance::GcReportJson's form), local or the server's.
void Print(Context& ctx, const json& r) {
  if (ctx.json) return PrintJson(r);
  if (ctx.quiet) return;
  fmt::print("marked {} chunks referenced by {} snapshots in {:.2f} s ({} threads)\n",
             U64(r, "referenced_chunks"), U64(r, "snapshots"), Seconds(r, "mark_seconds"),
             U64(r, "threads"));
  fmt::print("swept {} chunk files in {:.2f} s: {} in use\n", U64(r, "chunk_files"),
             Seconds(r, "sweep_seconds"), U64(r, "in_use_chunks"));
  fmt::print("{} {} chunks, {}\n", r.value("dry_run", false) ? "would remove" : "removed",
             U64(r, "removed_chunks"), HumanBytes(U64(r, "removed_bytes")));
  const std::string cutoff = Str(r, "cutoff");
  std::string why;
  if (!Str(r, "held_back_by_backup").empty()) {
    why = fmt::format("; a backup running since {} holds the cutoff back", cutoff);
  }
  if (r.value("deferred", false)) {
    why += "; a backup ran meanwhile, so what was set aside goes at the next gc";
  }
  fmt::print("pending {} chunks, {} (unreferenced, but used after {}{})\n",
             U64(r, "pending_chunks"), HumanBytes(U64(r, "pending_bytes")), cutoff, why);
  if (U64(r, "restored_chunks") > 0) {
    fmt::print("put back {} chunks a backup referenced while an earlier gc ran\n",
               U64(r, "restored_chunks"));
  }
  if (U64(r, "removed_temp_files") > 0) {
    fmt::print("removed {} temporary files left by killed backups\n",
               U64(r, "removed_temp_files"));
  }
  if (U64(r, "bad_chunks") > 0) {
    fmt::print("{} quarantined chunks (*.bad) kept for inspection\n", U64(r, "bad_chunks"));
  }
  // What limited the run (pipeline::BottleneckJson), the last line as for
  // restore and verify; a server older than the stage meter has none.
  if (r.contains("bottleneck") && r["bottleneck"].is_object()) {
    fmt::print("bottleneck: {}\n", Str(r["bottleneck"], "line"));
  }
}

// The gc as a task on the server: started (or, when one runs already,
// joined), followed to its end, its report printed as a local gc's.
void RunOnServer(Context& ctx, const GcArgs& args, const maintenance::GcOptions& options) {
  auto target = ServerTargetFor(ctx);
  if (!target.ok()) return Fail(ctx, target.status());
  json body = {{"dry_run", options.dry_run}, {"grace_s", options.grace_seconds}};
  if (options.threads > 0) body["threads"] = options.threads;
  auto task = RunServerTask(ctx, *target, "gc", body, args.detach);
  if (!task) return;  // detached, or failed (reported)
  if (task->value("state", "") != "ok" || !(*task)["report"].is_object()) {
    return Fail(ctx, UnknownError(fmt::format("gc task {} on the server: {}",
                                              task->value("id", "?"),
                                              task->value("error", "ended without a report"))));
  }
  Print(ctx, (*task)["report"]);
}

void Run(Context& ctx, const GcArgs& args) {
  maintenance::GcOptions options;
  if (args.grace == "0" || args.grace == "0s") {
    options.grace_seconds = 0;
  } else {
    auto grace = ParseDuration(args.grace);
    if (!grace.ok()) return Fail(ctx, grace.status().WithContext("--grace"));
    options.grace_seconds = *grace / 1000000000;
  }
  options.threads = args.threads;
  options.dry_run = args.dry_run;
  options.logger = ctx.logger.get();
  if (RepoIsServer(ctx)) return RunOnServer(ctx, args, options);
  if (args.detach) {
    return Fail(ctx, InvalidArgumentError("--detach goes with a server (-r https://…)"));
  }
  // A slow disk under the indexes (hidden, for tests: the mark's reads
  // must then be named the bottleneck); local datastores only.
  std::unique_ptr<FaultInjectionEnv> slow;
  if (args.inject_read_latency_ms > 0) {
    slow = std::make_unique<FaultInjectionEnv>(ctx.env.get());
    slow->SetReadLatencyMicros(static_cast<int64_t>(args.inject_read_latency_ms * 1000));
  }
  auto store = slow ? datastore::Datastore::Open(*slow, ctx.repo) : OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  pipeline::Progress progress;
  options.progress = &progress;
  auto report = maintenance::RunGc(**store, options);
  if (!report.ok()) return Fail(ctx, report.status());
  Print(ctx, maintenance::GcReportJson(*report));
}

}  // namespace

void RegisterGc(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "gc", "remove chunks no snapshot references (safe beside running backups)");
  auto args = std::make_shared<GcArgs>();
  AddRepoOptions(cmd, ctx);
  AddJsonOption(cmd, ctx);
  cmd->add_flag("--dry-run", args->dry_run, "count what would be removed; remove nothing");
  cmd->add_option("--grace", args->grace,
                  "keep unreferenced chunks used within this long before the start (default "
                  "5m; 0 for none)")
      ->type_name("DURATION");
  cmd->add_option("--threads", args->threads,
                  "mark and sweep threads (default: one per core, at least 16: unlink and stat "
                  "wait on the disk)")
      ->check(CLI::Range(1, 256))
      ->type_name("N");
  cmd->add_flag("--detach", args->detach,
                "on a server: start the gc task and print its id (follow it with cairn task "
                "show --follow ID)");
  cmd->add_option("--inject-read-latency", args->inject_read_latency_ms,
                  "add MS to every read of the datastore's files (a slow disk under the indexes)")
      ->check(CLI::Range(0.0, 60000.0))
      ->group("");  // hidden, as restore's --inject-write-latency
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
