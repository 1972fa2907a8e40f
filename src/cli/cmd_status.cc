// cairn status -r REPO [--json]
//
// On a server (-r https://HOST:PORT/STORE) the server reads its datastore's
// status (GET …/status) and answers the JSON `status --json` prints; the
// human output is printed from that JSON either way, so both look the same.
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "maintenance/store_status.h"

namespace cairn::cli {
namespace {

using nlohmann::json;

uint64_t U64(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<uint64_t>() : 0;
}
// An RFC 3339 time, or "never" for null.
std::string When(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "never";
}

Result<json> ReadStatus(Context& ctx) {
  if (RepoIsServer(ctx)) {
    CAIRN_ASSIGN_OR_RETURN(json j, CallStore(ctx, "GET", "status"));
    j["datastore"] = ctx.repo;  // the server names the store; the user knows its URL
    return j;
  }
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepo(ctx));
  CAIRN_ASSIGN_OR_RETURN(auto status, maintenance::ReadStoreStatus(*store));
  return maintenance::StoreStatusJson(status, store->DisplayName());
}

void Print(const json& s) {
  fmt::print("datastore   {}\n", s.value("datastore", ""));
  const uint64_t namespaces = U64(s, "namespaces");
  fmt::print("snapshots   {} in {} groups{}\n", U64(s, "snapshots"), U64(s, "groups"),
             namespaces > 0 ? fmt::format(" and {} namespaces", namespaces) : "");
  const double dedup = s.contains("dedup_factor") && s["dedup_factor"].is_number()
                           ? s["dedup_factor"].get<double>()
                           : 0;
  fmt::print("data        {} in snapshots, {} in {} chunks on disk: dedup factor {:.2f}\n",
             HumanBytes(U64(s, "logical_bytes")), HumanBytes(U64(s, "chunk_bytes")),
             U64(s, "chunks"), dedup);
  if (U64(s, "trash_chunks") > 0) {
    fmt::print("set aside   {} chunks, {} (freed by the next gc)\n", U64(s, "trash_chunks"),
               HumanBytes(U64(s, "trash_bytes")));
  }
  if (U64(s, "bad_chunks") > 0) fmt::print("quarantined {} chunks (*.bad)\n", U64(s, "bad_chunks"));
  fmt::print("verify      last {}; {} snapshots never verified, {} failed\n",
             When(s, "last_verify"), U64(s, "never_verified"), U64(s, "failed_verify"));
  if (s.contains("last_gc") && s["last_gc"].is_object()) {
    const json& gc = s["last_gc"];
    fmt::print("gc          last {}: removed {} chunks ({}), {} pending ({})\n", When(gc, "time"),
               U64(gc, "removed_chunks"), HumanBytes(U64(gc, "removed_bytes")),
               U64(gc, "pending_chunks"), HumanBytes(U64(gc, "pending_bytes")));
  } else {
    fmt::print("gc          never run\n");
  }
  if (U64(s, "fs_total_bytes") > 0) {
    fmt::print("disk        {} free of {}\n", HumanBytes(U64(s, "fs_free_bytes")),
               HumanBytes(U64(s, "fs_total_bytes")));
  }
}

void Run(Context& ctx) {
  auto status = ReadStatus(ctx);
  if (!status.ok()) return Fail(ctx, status.status());
  if (ctx.json) return PrintJson(*status);
  Print(*status);
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
