// cairn gc -r REPO [--dry-run] [--grace DURATION] [--threads N] [--json]
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/gc.h"

namespace cairn::cli {
namespace {

struct GcArgs {
  bool dry_run = false;
  std::string grace = "5m";
  int threads = 0;
};

nlohmann::json ToJson(const maintenance::GcReport& r) {
  return {{"dry_run", r.dry_run},
          {"snapshots", r.snapshots},
          {"indexes", r.indexes},
          {"referenced_chunks", r.referenced_chunks},
          {"chunk_files", r.chunk_files},
          {"in_use_chunks", r.in_use_chunks},
          {"removed_chunks", r.removed_chunks},
          {"removed_bytes", r.removed_bytes},
          {"pending_chunks", r.pending_chunks},
          {"pending_bytes", r.pending_bytes},
          {"restored_chunks", r.restored_chunks},
          {"removed_temp_files", r.removed_temp_files},
          {"bad_chunks", r.bad_chunks},
          {"deferred", r.deferred},
          {"held_back_by_backup",
           r.held_back_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.held_back_by)},
          {"cutoff", datastore::FormatRfc3339(r.cutoff_unix_ns / 1000000000)},
          {"threads", r.threads},
          {"mark_seconds", r.mark_seconds},
          {"sweep_seconds", r.sweep_seconds}};
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
  if (Status s = RequireLocal(ctx, "gc"); !s.ok()) return Fail(ctx, s);
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto report = maintenance::RunGc(**store, options);
  if (!report.ok()) return Fail(ctx, report.status());
  const auto& r = *report;
  if (ctx.json) return PrintJson(ToJson(r));
  fmt::print("marked {} chunks referenced by {} snapshots in {:.2f} s ({} threads)\n",
             r.referenced_chunks, r.snapshots, r.mark_seconds, r.threads);
  fmt::print("swept {} chunk files in {:.2f} s: {} in use\n", r.chunk_files, r.sweep_seconds,
             r.in_use_chunks);
  fmt::print("{} {} chunks, {}\n", r.dry_run ? "would remove" : "removed", r.removed_chunks,
             HumanBytes(r.removed_bytes));
  std::string why;
  if (!r.held_back_by.empty()) {
    why = fmt::format("; a backup running since {} holds the cutoff back",
                      datastore::FormatRfc3339(r.cutoff_unix_ns / 1000000000));
  }
  if (r.deferred) why += "; a backup ran meanwhile, so what was set aside goes at the next gc";
  fmt::print("pending {} chunks, {} (unreferenced, but used after {}{})\n", r.pending_chunks,
             HumanBytes(r.pending_bytes), datastore::FormatRfc3339(r.cutoff_unix_ns / 1000000000),
             why);
  if (r.restored_chunks > 0) {
    fmt::print("put back {} chunks a backup referenced while an earlier gc ran\n",
               r.restored_chunks);
  }
  if (r.removed_temp_files > 0) {
    fmt::print("removed {} temporary files left by killed backups\n", r.removed_temp_files);
  }
  if (r.bad_chunks > 0) {
    fmt::print("{} quarantined chunks (*.bad) kept for inspection\n", r.bad_chunks);
  }
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
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
