// cairn benchmark [-r REPO] [--keyfile KEY] [--json] [--seconds S]
//
// How fast this machine runs each stage of cairn's chunk path, per core and
// on all cores, plain and encrypted (AES-256-GCM, HMAC-SHA256 ids, and the
// whole per-chunk check restore runs with a key), beside the reference
// figures of proxmox-backup-client benchmark; with -r, also chunk insert and read rates on the datastore's
// file system and a restore rehearsal of its newest image; with --keyfile,
// encrypted snapshots made with that key are read and rehearsed too (without
// it they are skipped, and the notes say so) (perf/machine_bench.h says how
// it measures).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "cli/cli_util.h"
#include "cli/key_options.h"
#include "perf/machine_bench.h"

namespace cairn::cli {
namespace {

struct BenchmarkArgs {
  double seconds = 1;
};

void Run(Context& ctx, const BenchmarkArgs& args) {
  // The datastore (and its key) is opened first, so a wrong -r or key
  // fails before any work. Without a datastore a key has nothing to read:
  // the CPU rows use a benchmark key of their own.
  std::unique_ptr<datastore::Datastore> store;
  if (!ctx.repo.empty() || std::getenv("CAIRN_REPO") != nullptr) {
    if (Status s = RequireLocal(ctx, "benchmark -r"); !s.ok()) return Fail(ctx, s);
    auto opened = OpenRepoWithKey(ctx);
    if (!opened.ok()) return Fail(ctx, opened.status());
    store = std::move(*opened);
  }
  perf::MachineBenchOptions options;
  options.seconds = args.seconds;
  options.store = store.get();
  if (!ctx.json) {
    // Rows appear as they are measured: the whole run takes a while.
    options.on_start = [](const perf::MachineBenchReport& report) {
      fmt::print("{}", perf::FormatHeader(report));
      std::fflush(stdout);
    };
    options.on_row = [](const perf::BenchRow& row) {
      fmt::print("{}", perf::FormatRow(row));
      std::fflush(stdout);
    };
  }
  auto report = perf::RunMachineBenchmark(*ctx.env, options);
  if (!report.ok()) return Fail(ctx, report.status());
  if (ctx.json) return PrintJson(perf::ReportJson(*report));
  fmt::print("{}", perf::FormatFooter(*report));
}

}  // namespace

void RegisterBenchmark(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("benchmark",
                                 "measure how fast this machine hashes, compresses, encrypts, "
                                 "checks and stores chunks, per core and on all cores (with -r: "
                                 "a datastore)");
  auto args = std::make_shared<BenchmarkArgs>();
  cmd->add_option("-r,--repo", ctx.repo,
                  "datastore to measure too (or set CAIRN_REPO); test chunks go to a scratch "
                  "directory inside it that is removed afterwards");
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("--seconds", args->seconds, "duration of each measurement (default 1)")
      ->check(CLI::Range(0.001, 600.0));
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
