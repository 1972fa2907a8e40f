// cairn restore -r REPO SNAPSHOT ARCHIVE TARGET [--overwrite] [--jobs auto|N]
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "restore/restore.h"

namespace cairn::cli {
namespace {

struct RestoreArgs {
  std::string snapshot;
  std::string archive;
  std::string target;
  bool overwrite = false;
  std::string jobs = "auto";
  BenchOptions bench;
};

void Run(Context& ctx, const RestoreArgs& args) {
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto spec = datastore::ParseSnapshotSpec(ctx.ns, args.snapshot);
  if (!spec.ok()) return Fail(ctx, spec.status());
  auto jobs_or = ParseJobs(args.jobs);
  if (!jobs_or.ok()) return Fail(ctx, jobs_or.status());
  int jobs = *jobs_or;
  std::unique_ptr<store::ChunkSource> injected;
  auto source = MaybeInject(args.bench.inject_latency, (*store)->chunks(), &injected);
  if (!source.ok()) return Fail(ctx, source.status());
  restore::RestoreRequest request{*spec, args.archive, args.target, args.overwrite, jobs, *source};
  request.cpu_workers = args.bench.cpu_workers;
  auto report = restore::RunRestore(**store, request);
  if (!report.ok()) return Fail(ctx, report.status());
  const auto& s = report->stats;
  bool to_stdout = args.target == "-";
  if (ctx.json && !to_stdout) {
    PrintJson({{"snapshot", report->snapshot.ToString()},
               {"archive", report->archive},
               {"target", report->target},
               {"bytes", s.bytes},
               {"seconds", report->seconds},
               {"mib_per_s", MiBPerSecond(s.bytes, report->seconds)},
               {"chunks_fetched", s.chunks_fetched},
               {"stored_bytes_read", s.stored_bytes},
               {"zero_chunks", s.zero_chunks},
               {"written_bytes", s.written_bytes},
               {"jobs", {{"mode", jobs == 0 ? "auto" : "fixed"},
                         {"final", s.jobs_final},
                         {"max", s.jobs_max},
                         {"mean", s.jobs_mean}}},
               {"peak_bytes_in_flight", s.peak_bytes_in_flight}});
  } else {
    // With the data on stdout, the summary goes to stderr.
    fmt::print(to_stdout ? stderr : stdout,
               "restored {} of {} to {}: {} in {:.2f} s ({}), {} chunks fetched, {} zero, "
               "reads in flight {} (max {})\n",
               report->archive, report->snapshot.ToString(), report->target, HumanBytes(s.bytes),
               report->seconds, HumanRate(s.bytes, report->seconds), s.chunks_fetched,
               s.zero_chunks, s.jobs_final, s.jobs_max);
  }
}

}  // namespace

void RegisterRestore(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("restore", "restore an archive of a snapshot");
  auto args = std::make_shared<RestoreArgs>();
  AddRepoOptions(cmd, ctx);
  AddJsonOption(cmd, ctx);
  cmd->add_option("SNAPSHOT", args->snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
  cmd->add_option("ARCHIVE", args->archive, "archive name, like disk0.img")->required();
  cmd->add_option("TARGET", args->target, "file, block device, or - for stdout")->required();
  cmd->add_flag("--overwrite", args->overwrite, "write over an existing file or device");
  cmd->add_option("--jobs", args->jobs,
                  "reads in flight: auto (self-tuning, default) or N");
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
