// cairn verify -r REPO [SNAPSHOT|GROUP] [--ns NS] [--json]
#include <algorithm>

#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/progress_bar.h"
#include "verify/verify.h"

namespace cairn::cli {
namespace {

// Snapshots named by `text`: "" = all, "vm/100" = a group, else a snapshot.
Result<std::vector<datastore::SnapshotRef>> Select(const datastore::Datastore& store,
                                                   const std::string& ns,
                                                   const std::string& text) {
  if (text.empty()) {
    if (ns.empty()) return std::vector<datastore::SnapshotRef>{};  // the whole datastore
    CAIRN_ASSIGN_OR_RETURN(auto all, store.ListAllSnapshots());
    std::erase_if(all, [&](const auto& s) { return s.group.ns != ns; });
    if (all.empty()) return NotFoundError(fmt::format("namespace {} has no snapshots", ns));
    return all;
  }
  if (std::count(text.begin(), text.end(), '/') == 1) {
    CAIRN_ASSIGN_OR_RETURN(auto group, datastore::ParseGroup(ns, text));
    CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(group));
    if (snaps.empty()) return NotFoundError(fmt::format("group {} has no snapshots", text));
    return snaps;
  }
  CAIRN_ASSIGN_OR_RETURN(auto spec, datastore::ParseSnapshotSpec(ns, text));
  CAIRN_ASSIGN_OR_RETURN(auto snap, store.Resolve(spec));
  return std::vector<datastore::SnapshotRef>{snap};
}

struct VerifyArgs {
  std::string what;
  std::string jobs = "auto";
  BenchOptions bench;
};

void Run(Context& ctx, const VerifyArgs& args) {
  const std::string& what = args.what;
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto snaps = Select(**store, ctx.ns, what);
  if (!snaps.ok()) return Fail(ctx, snaps.status());
  verify::VerifyOptions options;
  options.snapshots = *snaps;
  options.logger = ctx.logger.get();
  auto jobs = ParseJobs(args.jobs);
  if (!jobs.ok()) return Fail(ctx, jobs.status());
  options.jobs = *jobs;
  options.cpu_workers = args.bench.cpu_workers;
  std::unique_ptr<store::ChunkSource> injected;
  auto source = MaybeInject(args.bench.inject_latency, (*store)->chunks(), &injected);
  if (!source.ok()) return Fail(ctx, source.status());
  if (injected) options.source = injected.get();  // else: the store itself (quarantine on)
  pipeline::Progress progress;
  options.progress = &progress;
  auto report = [&] {
    ProgressBar bar(progress, stderr, ProgressBar::StderrIsTerminal());
    return verify::RunVerify(**store, options);
  }();
  if (!report.ok()) return Fail(ctx, report.status());
  const auto& r = *report;
  size_t failed = std::count_if(r.snapshots.begin(), r.snapshots.end(),
                                [](const auto& s) { return !s.ok; });
  if (ctx.json) {
    nlohmann::json snapshots = nlohmann::json::array();
    for (const auto& s : r.snapshots) {
      snapshots.push_back({{"snapshot", s.snapshot.ToString()},
                           {"ns", s.snapshot.group.ns},
                           {"state", s.ok ? "ok" : "failed"},
                           {"chunks", s.chunks}});
    }
    nlohmann::json problems = nlohmann::json::array();
    for (const auto& p : r.problems) {
      problems.push_back(
          {{"what", p.what}, {"error", p.error}, {"missing", p.missing}, {"affected", p.affected}});
    }
    PrintJson({{"ok", r.ok()},
               {"snapshots", snapshots},
               {"problems", problems},
               {"unique_chunks", r.unique_chunks},
               {"stored_bytes", r.stored_bytes},
               {"raw_bytes", r.raw_bytes},
               {"seconds", r.seconds},
               {"mib_per_s", MiBPerSecond(r.raw_bytes, r.seconds)},
               {"jobs", {{"mode", options.jobs == 0 ? "auto" : "fixed"},
                         {"final", r.jobs_final},
                         {"max", r.jobs_max}}}});
  } else {
    for (const auto& p : r.problems) {
      fmt::print("BAD {}: {}\n", p.what, p.error);
      for (const auto& a : p.affected) fmt::print("    needed by {}\n", a);
    }
    fmt::print("verified {} snapshots, {} unique chunks, {} in {:.2f} s ({}): {}\n",
               r.snapshots.size(), r.unique_chunks, HumanBytes(r.raw_bytes), r.seconds,
               HumanRate(r.raw_bytes, r.seconds),
               r.ok() ? "all ok" : fmt::format("{} problems, {} snapshots FAILED",
                                               r.problems.size(), failed));
  }
  if (!r.ok()) ctx.exit_code = kExitCorruption;
}

}  // namespace

void RegisterVerify(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("verify", "check that snapshots are intact and restorable");
  auto args = std::make_shared<VerifyArgs>();
  AddRepoOptions(cmd, ctx);
  AddJsonOption(cmd, ctx);
  cmd->add_option("SNAPSHOT_OR_GROUP", args->what,
                  "vm/100/2026-11-30T05:00:00Z, vm/100/latest or vm/100 (default: everything)");
  cmd->add_option("--jobs", args->jobs, "reads in flight: auto (self-tuning, default) or N");
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
