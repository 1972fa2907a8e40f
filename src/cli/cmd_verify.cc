// cairn verify -r REPO [SNAPSHOT|GROUP] [--ns NS] [--outdated-after DAYS]
//   [--max-duration DURATION | --budget PERCENT] [--cover-days N]
//   [--order auto|id|inode] [--jobs auto|N] [--json]
// cairn verify -r https://HOST:PORT/STORE --on-server [--detach] [scope and slice options]
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/cmd_task.h"
#include "cli/progress_bar.h"
#include "verify/verify.h"
#include "verify/verify_report.h"

namespace cairn::cli {
namespace {

struct VerifyArgs {
  std::string what;
  std::string jobs = "auto";
  double outdated_after_days = 0;
  std::string max_duration;
  double budget_percent = 0;
  int cover_days = 0;
  std::string order = "auto";
  bool no_ledger = false;
  bool on_server = false;  // --on-server: a task on the server (cmd_task.h)
  bool detach = false;
  BenchOptions bench;
};

// verify --on-server: the server runs the verify as a task (its own chunk
// store, quarantine and verify state, as a local verify there would); this
// follows it and exits as the local verify does.
void RunOnServer(Context& ctx, const VerifyArgs& args) {
  if (args.no_ledger || !args.bench.inject_latency.empty() || args.jobs != "auto") {
    return Fail(ctx, InvalidArgumentError(
                         "--on-server takes no --jobs or --no-ledger: the server tunes its own run"));
  }
  auto target = ServerTargetFor(ctx);
  if (!target.ok()) return Fail(ctx, target.status());
  nlohmann::json options = nlohmann::json::object();
  if (!ctx.ns.empty()) options["ns"] = ctx.ns;
  if (!args.what.empty()) options["snapshot"] = args.what;
  if (args.outdated_after_days > 0) options["outdated_after_days"] = args.outdated_after_days;
  if (!args.max_duration.empty()) {
    auto d = ParseDuration(args.max_duration);
    if (!d.ok()) return Fail(ctx, d.status());
    options["max_duration_s"] = std::max<int64_t>(1, (*d + 999'999'999) / 1'000'000'000);
  }
  if (args.budget_percent > 0) options["budget_percent"] = args.budget_percent;
  if (args.cover_days > 0) options["cover_days"] = args.cover_days;
  if (args.order != "auto") options["order"] = args.order;
  auto task = RunServerTask(ctx, *target, "verify", options, args.detach);
  if (!task) return;  // detached, or failed (reported)
  PrintTaskOutcome(ctx, *task);
}

// The coverage promise of a report (--cover-days).
struct Coverage {
  double covered = 1;       // share of the distinct chunks found ok within the promise
  double oldest_days = -1;  // age of the stalest check; negative: some chunk has none
  double pace_s = 0;        // the even daily pace at this run's speed; negative: unknown
  std::string pace_text;    // "120 s", or "?"
};

Coverage CoverageOf(const verify::VerifyReport& r, double speed, int64_t now) {
  Coverage c;
  if (r.unique_chunks > 0) {
    c.covered = static_cast<double>(r.covered_chunks) / static_cast<double>(r.unique_chunks);
  }
  if (r.unique_chunks == 0) {
    c.oldest_days = 0;  // nothing to cover
  } else if (r.never_checked_chunks == 0 && r.oldest_check > 0) {
    c.oldest_days = static_cast<double>(std::max<int64_t>(0, now - r.oldest_check)) / 86400;
  }
  c.pace_s = r.pace_bytes == 0 ? 0
             : speed > 0       ? static_cast<double>(r.pace_bytes) / speed
                               : -1;
  c.pace_text = c.pace_s < 0 ? std::string("?") : fmt::format("{:.0f} s", std::ceil(c.pace_s));
  return c;
}

nlohmann::json CoverJson(int days, const verify::VerifyReport& r, const Coverage& c) {
  return {{"days", days},
          {"due_chunks", r.due_chunks},
          {"due_bytes", r.due_bytes},
          {"due_over_limit", r.due_over_limit},
          {"covered_chunks", r.covered_chunks},
          {"covered_fraction", c.covered},
          {"never_checked_chunks", r.never_checked_chunks},
          {"oldest_age_days",
           c.oldest_days < 0 ? nlohmann::json(nullptr) : nlohmann::json(c.oldest_days)},
          {"pace_bytes_per_day", r.pace_bytes},
          {"pace_seconds_per_day", c.pace_s}};
}

// Where a verify run keeps what it found (docs/SERVER.md, "Where verify
// results are kept"): a datastore verified at its path (or in an object
// store) records its ledger and each snapshot's verify state in it; a
// server's datastore verified from a client records the ledger in the
// client's cache only (its own --outdated-after and resumption) and leaves
// the server's record alone, whatever the token: the server records only
// what it read itself (verify --on-server).
struct Recorded {
  bool on_client = false;  // a server's datastore, verified here
  std::string ledger;      // the ledger's directory; empty: not used
  bool snapshot_state = true;
};

Recorded RecordedFor(const datastore::Datastore& store, bool use_ledger) {
  Recorded r;
  r.on_client = store.is_remote() && !store.chunks_in_object_store();
  r.snapshot_state = !r.on_client;
  if (use_ledger) r.ledger = JoinPath(store.DisplayName(), ".ledger");
  return r;
}

nlohmann::json RecordedJson(const Recorded& r) {
  return {{"where", r.on_client ? "client" : "datastore"},
          {"ledger", r.ledger.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.ledger)},
          {"snapshot_state", r.snapshot_state},
          {"on_server", false}};
}

// Plan: the run's options from the arguments; `injected` holds a source
// that injects latency (a benchmark's), when asked for.
Result<verify::VerifyOptions> PlanRun(Context& ctx, const VerifyArgs& args,
                                      const datastore::Datastore& store,
                                      std::unique_ptr<store::ChunkSource>* injected) {
  verify::VerifyOptions options;
  CAIRN_ASSIGN_OR_RETURN(options.snapshots, verify::SelectSnapshots(store, ctx.ns, args.what));
  options.logger = ctx.logger.get();
  CAIRN_ASSIGN_OR_RETURN(options.jobs, ParseJobs(args.jobs));
  options.cpu_workers = args.bench.cpu_workers;
  options.use_ledger = !args.no_ledger;
  options.record_state = RecordedFor(store, options.use_ledger).snapshot_state;
  options.outdated_after_s = static_cast<int64_t>(args.outdated_after_days * 86400);
  options.budget = args.budget_percent / 100;
  if (!args.max_duration.empty()) {
    CAIRN_ASSIGN_OR_RETURN(options.max_duration_ns, ParseDuration(args.max_duration));
  }
  options.scope = ctx.ns + "|" + args.what;
  options.cover_days = args.cover_days;
  CAIRN_ASSIGN_OR_RETURN(options.order, verify::ParseChunkOrder(args.order));
  CAIRN_ASSIGN_OR_RETURN(store::ChunkSource * source,
                         MaybeInject(args.bench.inject_latency, store.source(), injected));
  // Else the store itself (quarantine on: local or object store), or a
  // server: no quarantine from here.
  if (*injected || (store.is_remote() && !store.chunks_in_object_store())) {
    options.source = source;
  }
  return options;
}

// What the report says and only this command knows.
struct RunFacts {
  const verify::VerifyOptions& options;
  const Recorded& recorded;
  const store::ConnectionSummary& connections;
  const pipeline::Bottleneck& bottleneck;
  const Coverage& cover;
};

void PrintReportJson(const VerifyArgs& args, const verify::VerifyReport& r, const RunFacts& f) {
  nlohmann::json j = verify::VerifyReportJson(r);
  j["jobs"]["mode"] = f.options.jobs == 0 ? "auto" : "fixed";
  j["cover"] = args.cover_days > 0 ? CoverJson(args.cover_days, r, f.cover) : nlohmann::json();
  j["connections"] =
      f.connections.cap > 0 ? ConnectionsJson(f.connections) : nlohmann::json(nullptr);
  j["recorded"] = RecordedJson(f.recorded);
  j["bottleneck"] = BottleneckJson(f.bottleneck);
  PrintJson(j);
}

// The text report after the problems (printed first, even with --quiet).
void PrintReportText(const VerifyArgs& args, const verify::VerifyReport& r,
                     const verify::VerifyText& text, const RunFacts& f) {
  for (const auto& line : text.notes) fmt::print("{}\n", line);
  if (args.cover_days > 0) {
    fmt::print(
        "coverage: {} of {} chunks ({:.0f}%) found ok within {} days, {}; the promise "
        "takes about {} a day at this speed ({} a day)\n",
        r.covered_chunks, r.unique_chunks, 100 * f.cover.covered, args.cover_days,
        f.cover.oldest_days >= 0
            ? fmt::format("the oldest check {:.1f} days ago", f.cover.oldest_days)
            : fmt::format("{} never checked", r.never_checked_chunks),
        f.cover.pace_text, HumanBytes(r.pace_bytes));
  }
  const size_t keyless = std::count_if(r.snapshots.begin(), r.snapshots.end(),
                                       [](const auto& s) { return !s.content_checked; });
  if (keyless > 0) {
    fmt::print(
        "{} encrypted snapshots checked without their key: stored checksums only ({} chunks), "
        "the content was NOT checked; give --keyfile to check everything\n",
        keyless, r.keyless_chunks);
  }
  // The summary line ("verified …") stays the last but the bottleneck:
  // scripts read it.
  fmt::print("reads in flight {} (max {}, {})\n", r.jobs_final, r.jobs_max,
             f.options.jobs == 0 ? "auto" : "fixed");
  if (f.connections.cap > 0) fmt::print("{}\n", ConnectionsLine(f.connections));
  if (f.recorded.on_client) {
    fmt::print("recorded on this client only{}; the server's verify state is unchanged "
               "(verify --on-server records there)\n",
               f.recorded.ledger.empty() ? "" : fmt::format(": ledger {}", f.recorded.ledger));
  }
  fmt::print("chunk order: {}{}\n", verify::ChunkOrderName(r.order),
             f.options.order == verify::ChunkOrder::kAuto ? " (auto)" : "");
  fmt::print("{}\n{}\n", text.result, text.summary);
  PrintBottleneck(stdout, f.bottleneck);
}

void Run(Context& ctx, const VerifyArgs& args) {
  if (args.on_server) return RunOnServer(ctx, args);
  if (args.detach) return Fail(ctx, InvalidArgumentError("--detach goes with --on-server"));
  if (Status s = UseReconnectWindow(ctx); !s.ok()) return Fail(ctx, s);
  auto store = OpenRepoWithKey(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  std::unique_ptr<store::ChunkSource> injected;
  auto options = PlanRun(ctx, args, **store, &injected);
  if (!options.ok()) return Fail(ctx, options.status());

  // Execute.
  pipeline::Progress progress;
  options->progress = &progress;
  auto report = [&] {
    ProgressBar bar(progress, stderr, ShowProgress(ctx));
    return verify::RunVerify(**store, *options);
  }();
  if (!report.ok()) return Fail(ctx, report.status());

  // Report.
  const verify::VerifyReport& r = *report;
  const pipeline::Bottleneck bottleneck = progress.stages.Analyze();
  const store::ConnectionSummary connections = (*store)->source().Connections();
  const Recorded recorded = RecordedFor(**store, options->use_ledger);
  const double speed = r.seconds > 0 ? static_cast<double>(r.raw_bytes) / r.seconds : 0;
  const Coverage cover = CoverageOf(r, speed, ctx.env->NowUnixSeconds());
  const RunFacts facts{*options, recorded, connections, bottleneck, cover};
  if (!r.ledger_warning.empty()) fmt::print(stderr, "cairn: ledger: {}\n", r.ledger_warning);
  if (r.due_over_limit) {
    fmt::print(stderr,
               "cairn: warning: --cover-days {}: {} chunks ({}) not found ok within {} days had "
               "to be checked now, more than the {} allows; checked them anyway. The promise "
               "needs about {} a day at this speed ({} a day)\n",
               args.cover_days, r.due_chunks, HumanBytes(r.due_bytes), args.cover_days - 1,
               options->budget > 0 ? "--budget" : "--max-duration", cover.pace_text,
               HumanBytes(r.pace_bytes));
  }
  if (ctx.json) {
    PrintReportJson(args, r, facts);
  } else {
    const verify::VerifyText text = verify::DescribeVerify(r, args.outdated_after_days);
    for (const auto& line : text.problems) fmt::print("{}\n", line);
    if (!ctx.quiet) PrintReportText(args, r, text, facts);  // quiet: the damage and the exit code
  }
  if (!r.ok()) ctx.exit_code = kExitCorruption;
}

}  // namespace

void RegisterVerify(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("verify", "check that snapshots are intact and restorable");
  auto args = std::make_shared<VerifyArgs>();
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("SNAPSHOT_OR_GROUP", args->what,
                  "vm/100/2026-11-30T05:00:00Z, vm/100/latest or vm/100 (default: everything)");
  cmd->add_option("--jobs", args->jobs, "reads in flight: auto (self-tuning, default) or N");
  cmd->add_option("--outdated-after", args->outdated_after_days,
                  "skip chunks found ok within this many days (the ledger remembers)")
      ->check(CLI::NonNegativeNumber)
      ->type_name("DAYS");
  cmd->add_option("--max-duration", args->max_duration,
                  "verify a slice: start no chunk after this long (like 1h, 30m), stalest first; "
                  "the next run continues")
      ->type_name("DURATION");
  cmd->add_option("--budget", args->budget_percent,
                  "verify a slice: at most this percent of the selected bytes, stalest first")
      ->check(CLI::Range(0.0, 100.0))
      ->type_name("PERCENT");
  cmd->add_option("--cover-days", args->cover_days,
                  "promise that every chunk is checked within N days when run daily: chunks "
                  "not checked for N-1 days are checked now, past any slice limit")
      ->check(CLI::Range(1, 36500))
      ->type_name("N");
  cmd->add_option("--order", args->order,
                  "read order: auto (inode on a spinning disk, default), id or inode")
      ->check(CLI::IsMember({"auto", "id", "inode"}))
      ->type_name("ORDER");
  cmd->add_flag("--no-ledger", args->no_ledger, "neither read nor record the verify ledger")
      ->group("");
  cmd->add_flag("--on-server", args->on_server,
                "run the verify on the server (-r https://HOST:PORT/STORE) as a task, with its "
                "quarantine and verify state; needs a verify or admin token");
  cmd->add_flag("--detach", args->detach,
                "with --on-server: print the task id and return at once (cairn task show)");
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
