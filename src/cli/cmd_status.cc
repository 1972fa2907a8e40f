// cairn status -r REPO [--json]
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/status.h"

namespace cairn::cli {
namespace {

std::string When(int64_t unix_seconds) {
  return unix_seconds == 0 ? "never" : datastore::FormatRfc3339(unix_seconds);
}

void Run(Context& ctx) {
  if (Status s = RequireLocal(ctx, "status"); !s.ok()) return Fail(ctx, s);
  auto store = OpenRepo(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto st = maintenance::ReadStoreStatus(**store);
  if (!st.ok()) return Fail(ctx, st.status());
  const auto& s = *st;
  nlohmann::json gc = nullptr;
  if (s.last_gc) {
    gc = {{"time", When(s.last_gc->end_unix_ns / 1000000000)},
          {"removed_chunks", s.last_gc->removed_chunks},
          {"removed_bytes", s.last_gc->removed_bytes},
          {"pending_chunks", s.last_gc->pending_chunks},
          {"pending_bytes", s.last_gc->pending_bytes}};
  }
  if (ctx.json) {
    return PrintJson(
        {{"datastore", (*store)->path()},
         {"namespaces", s.namespaces},
         {"groups", s.groups},
         {"snapshots", s.snapshots},
         {"logical_bytes", s.logical_bytes},
         {"chunks", s.chunks},
         {"chunk_bytes", s.chunk_bytes},
         {"dedup_factor", s.DedupFactor()},
         {"trash_chunks", s.trash_chunks},
         {"trash_bytes", s.trash_bytes},
         {"bad_chunks", s.bad_chunks},
         {"never_verified", s.never_verified},
         {"failed_verify", s.failed_verify},
         {"last_verify", s.last_verify_unix == 0 ? nlohmann::json(nullptr)
                                                 : nlohmann::json(When(s.last_verify_unix))},
         {"last_gc", gc},
         {"fs_total_bytes", s.fs_total_bytes},
         {"fs_free_bytes", s.fs_free_bytes}});
  }
  fmt::print("datastore   {}\n", (*store)->path());
  fmt::print("snapshots   {} in {} groups{}\n", s.snapshots, s.groups,
             s.namespaces > 0 ? fmt::format(" and {} namespaces", s.namespaces) : "");
  fmt::print("data        {} in snapshots, {} in {} chunks on disk: dedup factor {:.2f}\n",
             HumanBytes(s.logical_bytes), HumanBytes(s.chunk_bytes), s.chunks, s.DedupFactor());
  if (s.trash_chunks > 0) {
    fmt::print("set aside   {} chunks, {} (freed by the next gc)\n", s.trash_chunks,
               HumanBytes(s.trash_bytes));
  }
  if (s.bad_chunks > 0) fmt::print("quarantined {} chunks (*.bad)\n", s.bad_chunks);
  fmt::print("verify      last {}; {} snapshots never verified, {} failed\n",
             When(s.last_verify_unix), s.never_verified, s.failed_verify);
  if (s.last_gc) {
    fmt::print("gc          last {}: removed {} chunks ({}), {} pending ({})\n",
               When(s.last_gc->end_unix_ns / 1000000000), s.last_gc->removed_chunks,
               HumanBytes(s.last_gc->removed_bytes), s.last_gc->pending_chunks,
               HumanBytes(s.last_gc->pending_bytes));
  } else {
    fmt::print("gc          never run\n");
  }
  if (s.fs_total_bytes > 0) {
    fmt::print("disk        {} free of {}\n", HumanBytes(s.fs_free_bytes),
               HumanBytes(s.fs_total_bytes));
  }
}

}  // namespace

void RegisterStatus(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "status", "datastore summary: snapshots, chunks, dedup factor, last gc and verify");
  AddRepoOptions(cmd, ctx);
  AddJsonOption(cmd, ctx);
  cmd->callback([&ctx] { Run(ctx); });
}

}  // namespace cairn::cli
