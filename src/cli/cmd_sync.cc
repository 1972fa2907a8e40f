// cairn sync --from SRC --to DST [GROUP|SNAPSHOT ...] [--ns NS] [--target-ns NS] [--max-depth N]
//   [--group-filter F ...] [--transfer-last N] [--verified-only]
//   [--encrypted-only] [--keep-protected] [--remove-vanished] [--resync-corrupt] [--dry-run]
//   [--limit-rate RATE] [--jobs auto|N] [--json]
//
// SRC and DST are any repository cairn opens: a path, https://HOST:PORT/STORE
// (token and fingerprint per side: --from-token/--to-token and
// --from-fingerprint/--to-fingerprint, else --token/--fingerprint and the
// environment) or s3://…. Chunks travel as stored: no key is needed.
#include <fmt/format.h>

#include <cstdlib>

#include "base/rate_limiter.h"
#include "cli/cmd_sync.h"
#include "cli/process_env.h"
#include "cli/progress_bar.h"
#include "remote/remote_backend.h"
#include "sync/sync.h"

namespace cairn::cli {
namespace {

struct SyncArgs {
  std::string from, to;
  std::string from_token, to_token, from_fingerprint, to_fingerprint;
  std::vector<std::string> selection;
  std::vector<std::string> group_filters;
  int transfer_last = 0;
  std::string target_ns;
  int max_depth = -1;
  bool verified_only = false, encrypted_only = false, keep_protected = false;
  bool remove_vanished = false, resync_corrupt = false, dry_run = false;
  std::string limit_rate;
  std::string jobs = "auto";
  BenchOptions bench;
};

// A context for one side: its repository, with the token and fingerprint
// given for that side (else the shared ones). Its env becomes the side's
// (a server's mirror, an object store's cache) and must outlive the store.
std::unique_ptr<Context> SideContext(const Context& ctx, const std::string& repo,
                                     const std::string& token, const std::string& fingerprint) {
  auto side = std::make_unique<Context>();
  side->env = NewProcessEnv();
  side->logger = NewNullLogger();
  side->repo = repo;
  side->token = token.empty() ? ctx.token : token;
  side->fingerprint = fingerprint.empty() ? ctx.fingerprint : fingerprint;
  side->limits = ctx.limits;
  return side;
}

Result<std::unique_ptr<datastore::Datastore>> OpenSide(Context& side, std::string_view which) {
  if (side.repo.empty()) {
    return InvalidArgumentError(
        fmt::format("--{} is required: a path, https://HOST:PORT/STORE "
                    "or s3://BUCKET/PREFIX",
                    which));
  }
  auto store = OpenRepo(side);
  if (!store.ok()) return store.status().WithContext(fmt::format("--{} {}", which, side.repo));
  return store;
}

}  // namespace

Result<std::shared_ptr<const datastore::Datastore>> OpenSyncSide(const Context& ctx,
                                                                 const std::string& repo,
                                                                 const std::string& token,
                                                                 const std::string& fingerprint,
                                                                 std::string_view which) {
  // The store, then the context whose env it uses: destroyed in reverse.
  struct Side {
    std::unique_ptr<Context> ctx;
    std::unique_ptr<datastore::Datastore> store;
  };
  auto side = std::make_shared<Side>();
  side->ctx = SideContext(ctx, repo, token, fingerprint);
  CAIRN_ASSIGN_OR_RETURN(side->store, OpenSide(*side->ctx, which));
  const datastore::Datastore* store = side->store.get();
  return std::shared_ptr<const datastore::Datastore>(std::move(side), store);
}

namespace {

// How the sync marker names SRC: an absolute path for a directory (the
// same store named two ways is one source), a URL as given.
std::string SourceName(const std::string& from) {
  if (from.find("://") != std::string::npos) return from;
  char* real = ::realpath(from.c_str(), nullptr);
  if (real == nullptr) return from;
  std::string out(real);
  std::free(real);
  return out;
}

nlohmann::json ReportJson(const sync::SyncReport& r, const std::string& from, const std::string& to,
                          bool dry_run) {
  nlohmann::json j = sync::SyncReportJson(r);
  j["from"] = from;
  j["to"] = to;
  j["dry_run"] = dry_run;
  return j;
}

void PrintReport(const sync::SyncReport& r, bool dry_run) {
  for (const std::string& line : sync::SyncReportLines(r, dry_run)) fmt::print("{}\n", line);
}

void Run(Context& ctx, const SyncArgs& args) {
  sync::SyncOptions options;
  auto filter = sync::GroupFilter::Parse(args.group_filters);
  if (!filter.ok()) return Fail(ctx, filter.status());
  options.filter = std::move(filter).value();
  if (args.transfer_last < 0) {
    return Fail(ctx, InvalidArgumentError("--transfer-last must be 1 or more"));
  }
  if (!args.limit_rate.empty()) {
    auto rate = ParseByteRate(args.limit_rate, "--limit-rate");
    if (!rate.ok()) return Fail(ctx, rate.status());
    options.limit_rate = *rate;
  }
  auto jobs = ParseJobs(args.jobs);
  if (!jobs.ok()) return Fail(ctx, jobs.status());
  options.jobs = *jobs;
  options.cpu_workers = args.bench.cpu_workers;
  options.selection = args.selection;
  options.ns = ctx.ns;
  options.target_ns = args.target_ns.empty() ? ctx.ns : args.target_ns;
  if (args.target_ns == "/") options.target_ns.clear();  // the root
  if (args.max_depth < -1 || args.max_depth > 7) {
    return Fail(ctx, InvalidArgumentError("--max-depth must be 0 to 7"));
  }
  options.max_depth = args.max_depth;
  options.transfer_last = args.transfer_last;
  options.verified_only = args.verified_only;
  options.encrypted_only = args.encrypted_only;
  options.keep_protected = args.keep_protected;
  options.remove_vanished = args.remove_vanished;
  options.resync_corrupt = args.resync_corrupt;
  options.dry_run = args.dry_run;
  options.source_name = SourceName(args.from);
  options.logger = ctx.logger.get();

  auto src_ctx = SideContext(ctx, args.from, args.from_token, args.from_fingerprint);
  auto dst_ctx = SideContext(ctx, args.to, args.to_token, args.to_fingerprint);
  auto src = OpenSide(*src_ctx, "from");
  if (!src.ok()) {
    ctx.repo_missing = src_ctx->repo_missing;
    return Fail(ctx, src.status());
  }
  auto dst = OpenSide(*dst_ctx, "to");
  if (!dst.ok()) {
    ctx.repo_missing = dst_ctx->repo_missing;
    return Fail(ctx, dst.status());
  }
  if (remote::IsRemoteUrl(args.to)) {
    Context* to = dst_ctx.get();
    options.set_on_server = [to](const datastore::SnapshotRef& snap, std::string_view notes,
                                 bool protect) -> Status {
      std::string query =
          remote::QueryString({{"ns", snap.group.ns}, {"snapshot", snap.ToString()}});
      if (!notes.empty()) {
        CAIRN_RETURN_IF_ERROR(CallStore(*to, "PUT", "notes" + query, AsBytes(notes)).status());
      }
      if (protect) {
        std::string body = nlohmann::json{{"protected", true}}.dump();
        CAIRN_RETURN_IF_ERROR(CallStore(*to, "PUT", "protected" + query, AsBytes(body)).status());
      }
      return Status::Ok();
    };
    // The server's forget route: it checks the token's rights and the
    // protection, as for `cairn forget -r https://…`.
    if (auto* server = dynamic_cast<remote::RemoteStoreBackend*>((*dst)->remote())) {
      options.begin_repair_on_server = [server](const datastore::SnapshotRef& snap) {
        return server->BeginRepair(snap);
      };
    }
    options.forget_on_server = [to](const datastore::SnapshotRef& snap) -> Status {
      std::string query =
          remote::QueryString({{"ns", snap.group.ns}, {"snapshot", snap.ToString()}});
      return CallStore(*to, "DELETE", "snapshot" + query).status();
    };
  }
  std::unique_ptr<store::ChunkSource> injected;
  auto source = MaybeInject(args.bench.inject_latency, (*src)->source(), &injected);
  if (!source.ok()) return Fail(ctx, source.status());
  options.source = *source;
  pipeline::Progress progress;
  options.progress = &progress;
  auto report = [&] {
    ProgressBar bar(progress, stderr, ShowProgress(ctx) && !args.dry_run);
    return sync::RunSync(**src, **dst, options);
  }();
  if (!report.ok()) return Fail(ctx, report.status());
  const pipeline::Bottleneck bottleneck = progress.stages.Analyze();
  if (ctx.json) {
    nlohmann::json j = ReportJson(*report, args.from, args.to, args.dry_run);
    j["bottleneck"] = args.dry_run ? nlohmann::json(nullptr) : BottleneckJson(bottleneck);
    PrintJson(j);
  } else if (!ctx.quiet) {
    PrintReport(*report, args.dry_run);
    if (!args.dry_run) PrintBottleneck(stdout, bottleneck);
  }
}

}  // namespace

void RegisterSync(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<SyncArgs>();
  auto* cmd = app.add_subcommand(
      "sync",
      "copy snapshots between datastores (path, https://HOST:PORT/STORE, s3://): each missing "
      "chunk once, as stored (no key needed), checked on arrival; manifests last");
  cmd->add_option("--from", args->from, "the source repository")->required();
  cmd->add_option("--to", args->to, "the destination repository")->required();
  cmd->add_option("selection", args->selection,
                  "groups (TYPE/ID) or snapshots (TYPE/ID/TIME, TYPE/ID/latest); default: all");
  cmd->add_option("--ns", ctx.ns, "only this namespace and those below it (default: all)");
  cmd->add_option("--target-ns", args->target_ns,
                  "where --ns lands on the destination, like copies/site1 (/ for the root; "
                  "default: the same namespace)");
  cmd->add_option("--max-depth", args->max_depth,
                  "namespace levels below --ns to sync (0: --ns only; default: all)");
  cmd->add_option("--token", ctx.token, "API token NAME:SECRET for a server on either side");
  cmd->add_option("--fingerprint", ctx.fingerprint, "certificate fingerprint for a server");
  cmd->add_option("--from-token", args->from_token,
                  "the source server's token (a reader token is enough)");
  cmd->add_option("--to-token", args->to_token, "the destination server's token (a backup token)");
  cmd->add_option("--from-fingerprint", args->from_fingerprint, "the source server's fingerprint");
  cmd->add_option("--to-fingerprint", args->to_fingerprint, "the destination server's fingerprint");
  // One value per --group-filter, so a group named after it stays a group.
  cmd->add_option("--group-filter", args->group_filters,
                  "type:vm|ct|host, group:TYPE/ID, regex:RE, or exclude:FILTER (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--transfer-last", args->transfer_last,
                  "only the newest N snapshots of each group");
  cmd->add_flag("--verified-only", args->verified_only,
                "only snapshots whose last verify on the source passed");
  cmd->add_flag("--encrypted-only", args->encrypted_only, "only encrypted snapshots");
  cmd->add_flag("--keep-protected", args->keep_protected,
                "protect on the destination what is protected on the source");
  cmd->add_flag("--remove-vanished", args->remove_vanished,
                "forget snapshots that sync copied from this source and the source no longer "
                "has (never protected ones; towards a server: an admin token)");
  cmd->add_flag("--resync-corrupt", args->resync_corrupt,
                "for snapshots the destination has whose last verify there failed, copy again "
                "every chunk it lacks (verify quarantined the bad ones; a server gets every "
                "chunk of the snapshot in a repair session)");
  cmd->add_flag("--dry-run", args->dry_run, "say what would be copied and removed, change nothing");
  cmd->add_option("--limit-rate", args->limit_rate,
                  "chunk bytes read from the source per second, like 20M (bytes, K, M, G)");
  cmd->add_option("--jobs", args->jobs, "reads in flight: auto (self-tuning, default) or N");
  AddJsonOption(cmd, ctx);
  AddBenchOptions(cmd, &args->bench);
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
