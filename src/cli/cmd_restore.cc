// cairn restore -r REPO SNAPSHOT ARCHIVE TARGET [--overwrite | --in-place]
// cairn restore -r REPO SNAPSHOT --all DIR
// cairn restore -r REPO SNAPSHOT (ARCHIVE | --all) --rehearse
// cairn restore -r REPO SNAPSHOT NAME.tree DIR [--include PATTERN]...
// cairn restore -r REPO SNAPSHOT NAME.img TARGET --instant [--listen ADDR] [--cache SIZE]
//   [--jobs auto|N] [--memory SIZE] [--json]
#include <fmt/format.h>

#include "access/instant_restore.h"
#include "base/fault_injection_env.h"
#include "cli/access_options.h"
#include "cli/cli_util.h"
#include "cli/progress_bar.h"
#include "restore/restore.h"

namespace cairn::cli {
namespace {

struct RestoreArgs {
  std::string snapshot;
  std::string archive;
  std::string target;
  std::string all_dir;  // --all DIR
  bool overwrite = false;
  bool in_place = false;
  bool rehearse = false;
  std::string jobs = "auto";
  std::string memory = "256M";
  std::vector<std::string> includes;
  BenchOptions bench;
  double inject_write_latency_ms = 0;  // hidden: a slow target, for the bottleneck's tests
  CLI::Option* all = nullptr;
  bool instant = false;
  std::string listen = "127.0.0.1:10809";
  std::string cache = "256M";
};

// Checks the combination of positionals and flags; fills the request.
Status Check(const RestoreArgs& args, restore::RestoreRequest* request) {
  request->all = args.all->count() > 0;
  if (request->all) {
    if (!args.target.empty() || (!args.archive.empty() && !args.all_dir.empty())) {
      return InvalidArgumentError("--all DIR restores every archive; name no archive or target");
    }
    // `restore SNAP DIR --all` reads DIR as the archive: take it as the directory.
    request->target = args.all_dir.empty() ? args.archive : args.all_dir;
    if (request->target.empty() && !args.rehearse) {
      return InvalidArgumentError("--all needs the directory to restore into: --all DIR");
    }
  } else {
    if (args.archive.empty()) {
      return InvalidArgumentError("name the archive to restore (like disk0.img), or pass --all DIR");
    }
    if (args.target.empty() && !args.rehearse) {
      return InvalidArgumentError(
          "name the target: a new file, an existing one with --overwrite or --in-place, a "
          "block device, or - for stdout");
    }
    request->archive = args.archive;
    request->target = args.target;
  }
  if (args.rehearse && args.in_place && request->target.empty()) {
    return InvalidArgumentError("--rehearse --in-place needs the target to compare against");
  }
  if (args.in_place && request->target == "-") {
    return InvalidArgumentError("--in-place needs a file or device, not stdout");
  }
  CAIRN_ASSIGN_OR_RETURN(request->max_bytes_in_flight, ParseByteSize(args.memory));
  if (request->max_bytes_in_flight < (uint64_t{16} << 20)) {
    return InvalidArgumentError(fmt::format("--memory {} is below the 16M minimum", args.memory));
  }
  request->overwrite = args.overwrite;
  request->in_place = args.in_place;
  request->rehearse = args.rehearse;
  request->includes = args.includes;
  CAIRN_ASSIGN_OR_RETURN(request->jobs, ParseJobs(args.jobs));
  request->cpu_workers = args.bench.cpu_workers;
  return Status::Ok();
}

double MBPerSecond(uint64_t bytes, double secs) {
  return secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0;
}

const char* KindWord(index::ArchiveKind kind) {
  switch (kind) {
    case index::ArchiveKind::kImage: return "image";
    case index::ArchiveKind::kBlob: return "blob";
    case index::ArchiveKind::kTree: return "tree";
  }
  return "image";
}

nlohmann::json TreeJson(const restore::ArchiveResult& a) {
  const auto& t = a.tree;
  return {{"archive", a.archive},
          {"kind", "tree"},
          {"target", a.target},
          {"entries", t.entries},
          {"files", t.files},
          {"dirs", t.dirs},
          {"symlinks", t.symlinks},
          {"hardlinks", t.hardlinks},
          {"specials", t.specials},
          {"bytes", t.bytes},
          {"fetched_bytes", t.fetched_bytes},
          {"chunks", t.chunks},
          {"zero_bytes", t.zero_bytes},
          {"seconds", t.seconds},
          {"mib_per_s", MiBPerSecond(t.bytes, t.seconds)},
          {"warnings", t.warnings}};
}

nlohmann::json ArchiveJson(const restore::ArchiveResult& a) {
  if (a.kind == index::ArchiveKind::kTree) return TreeJson(a);
  const auto& s = a.stats;
  return {{"archive", a.archive},
          {"kind", KindWord(a.kind)},
          {"target", a.target},
          {"bytes", s.bytes},
          {"seconds", s.seconds},
          {"mib_per_s", MiBPerSecond(s.bytes, s.seconds)},
          {"fetched_bytes", s.fetched_bytes},
          {"chunks_fetched", s.chunks_fetched},
          {"stored_bytes_read", s.stored_bytes},
          {"written_bytes", s.written_bytes},
          {"scanned_bytes", s.scanned_bytes},
          {"skipped_bytes",
           {{"zero", s.zero_bytes}, {"dedup", s.dedup_bytes}, {"in_place", s.in_place_bytes}}},
          {"zero_chunks", s.zero_chunks}};
}

void PrintJsonReport(const restore::RestoreReport& report, const restore::RestoreRequest& request,
                     const store::ConnectionSummary& connections,
                     const pipeline::Bottleneck& bottleneck) {
  restore::ImageRestoreStats total;
  nlohmann::json archives = nlohmann::json::array();
  const restore::ImageRestoreStats* pipeline = nullptr;
  for (const auto& a : report.archives) {
    archives.push_back(ArchiveJson(a));
    const auto& s = a.stats;
    total.bytes += s.bytes;
    total.fetched_bytes += s.fetched_bytes;
    total.chunks_fetched += s.chunks_fetched;
    total.stored_bytes += s.stored_bytes;
    total.written_bytes += s.written_bytes;
    total.zero_bytes += s.zero_bytes;
    total.dedup_bytes += s.dedup_bytes;
    total.in_place_bytes += s.in_place_bytes;
    total.zero_chunks += s.zero_chunks;
    if (a.kind == index::ArchiveKind::kImage) pipeline = &s;
  }
  nlohmann::json j = {
      {"snapshot", report.snapshot.ToString()},
      {"mode", request.rehearse ? "rehearse" : request.in_place ? "in-place" : "restore"},
      {"archives", archives},
      {"bytes", total.bytes},
      {"seconds", report.seconds},
      {"mib_per_s", MiBPerSecond(total.bytes, report.seconds)},
      {"fetched_bytes", total.fetched_bytes},
      {"chunks_fetched", total.chunks_fetched},
      {"stored_bytes_read", total.stored_bytes},
      {"written_bytes", total.written_bytes},
      {"skipped_bytes",
       {{"zero", total.zero_bytes}, {"dedup", total.dedup_bytes},
        {"in_place", total.in_place_bytes}}},
      {"zero_chunks", total.zero_chunks},
      {"jobs", {{"mode", request.jobs == 0 ? "auto" : "fixed"},
                {"final", pipeline ? pipeline->jobs_final : 0},
                {"max", pipeline ? pipeline->jobs_max : 0},
                {"mean", pipeline ? pipeline->jobs_mean : 0.0}}},
      {"memory_limit_bytes", request.max_bytes_in_flight},
      {"peak_bytes_in_flight", pipeline ? pipeline->peak_bytes_in_flight : 0},
      {"bottleneck", BottleneckJson(bottleneck)}};
  if (!request.all && !report.archives.empty()) {
    j["archive"] = report.archives[0].archive;
    j["target"] = report.archives[0].target;
  }
  if (connections.cap > 0) j["connections"] = ConnectionsJson(connections);
  if (request.rehearse) j["predicted_seconds"] = report.seconds;
  PrintJson(j);
}

void PrintTree(FILE* out, const restore::ArchiveResult& a, const restore::RestoreRequest& request) {
  const auto& t = a.tree;
  for (const std::string& w : t.warnings) fmt::print(stderr, "cairn: warning: {}\n", w);
  fmt::print(out,
             "{} {}: {} entries ({} files, {} dirs, {} symlinks, {} hardlinks, {} other){}; "
             "fetched {} ({} chunks), zero {}\n",
             request.rehearse ? "rehearsed" : "restored", a.archive, t.entries, t.files, t.dirs,
             t.symlinks, t.hardlinks, t.specials, a.target.empty() ? "" : " to " + a.target,
             HumanBytes(t.fetched_bytes), t.chunks, HumanBytes(t.zero_bytes));
  if (request.rehearse) {
    fmt::print(out,
               "rehearsal tree {} complete (files={}, dirs={}, bytes={}, duration={:.2f} s, "
               "speed={:.2f} MB/s): nothing written\n",
               a.archive, t.files, t.dirs, t.bytes, t.seconds, MBPerSecond(t.bytes, t.seconds));
  } else {
    fmt::print(out,
               "restore tree complete (files={}, dirs={}, bytes={}, duration={:.2f} s, "
               "speed={:.2f} MB/s)\n",
               t.files, t.dirs, t.bytes, t.seconds, MBPerSecond(t.bytes, t.seconds));
  }
}

void PrintHuman(FILE* out, const restore::RestoreReport& report,
                const restore::RestoreRequest& request,
                const store::ConnectionSummary& connections) {
  for (const auto& a : report.archives) {
    if (a.kind == index::ArchiveKind::kTree) {
      PrintTree(out, a, request);
      continue;
    }
    const auto& s = a.stats;
    const char* kind = KindWord(a.kind);
    if (a.kind == index::ArchiveKind::kBlob) {
      fmt::print(out, "{} {}: {}{}\n", request.rehearse ? "rehearsed" : "restored", a.archive,
                 HumanBytes(s.bytes), a.target.empty() ? "" : " to " + a.target);
    } else {
      std::string skipped = fmt::format("zero {}, dedup {}", HumanBytes(s.zero_bytes),
                                        HumanBytes(s.dedup_bytes));
      if (request.in_place) skipped += fmt::format(", already in place {}", HumanBytes(s.in_place_bytes));
      fmt::print(out, "{} {}: fetched {} ({} chunks), skipped {}; wrote {}; reads in flight {} "
                 "(max {}, {})\n",
                 request.rehearse ? "rehearsed" : "restored", a.archive, HumanBytes(s.fetched_bytes),
                 s.chunks_fetched, skipped, HumanBytes(s.written_bytes), s.jobs_final, s.jobs_max,
                 request.jobs == 0 ? "auto" : "fixed");
      if (connections.cap > 0) {
        fmt::print(out, "{}\n", ConnectionsLine(connections));
      }
    }
    if (request.rehearse) {
      fmt::print(out,
                 "rehearsal {} {} complete (bytes={}, duration={:.2f} s, speed={:.2f} MB/s): "
                 "nothing written; a real restore would take about {:.1f} s if the target keeps "
                 "up\n",
                 kind, a.archive, s.bytes, s.seconds, MBPerSecond(s.bytes, s.seconds), s.seconds);
    } else {
      fmt::print(out, "restore {} complete (bytes={}, duration={:.2f} s, speed={:.2f} MB/s)\n",
                 kind, s.bytes, s.seconds, MBPerSecond(s.bytes, s.seconds));
    }
  }
}

// restore --instant: the export first, the restore behind it, then the
// export goes on until SIGINT or SIGTERM (a VM may still run from it).
Status RunInstant(Context& ctx, const RestoreArgs& args, restore::RestoreRequest request) {
  const int64_t start = ctx.env->NowMonotonicNanos();
  auto elapsed = [&] { return static_cast<double>(ctx.env->NowMonotonicNanos() - start) / 1e9; };
  CAIRN_ASSIGN_OR_RETURN(AccessSettings settings, ParseAccessOptions({args.cache, args.jobs}));
  sigset_t signals = BlockStopSignals();
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepoWithKey(ctx));
  CAIRN_ASSIGN_OR_RETURN(request.snapshot, datastore::ParseSnapshotSpec(ctx.ns, args.snapshot));
  std::unique_ptr<store::ChunkSource> injected;
  CAIRN_ASSIGN_OR_RETURN(store::ChunkSource* source,
                         MaybeInject(args.bench.inject_latency, store->source(), &injected));
  request.source = source;
  access::ChunkCache cache({.capacity_bytes = settings.cache_bytes, .logger = ctx.logger.get()});
  access::InstantRestoreOptions o;
  o.listen = args.listen;
  o.readers = {&cache, source, access::ReadaheadFor(settings.cache_bytes, settings.jobs)};
  o.logger = ctx.logger.get();
  CAIRN_ASSIGN_OR_RETURN(auto instant, access::InstantRestore::Start(*store, request, o));
  const double ready = elapsed();
  auto event = [&](nlohmann::json j, const std::string& text) {
    if (ctx.json) {
      fmt::print("{}\n", j.dump());
    } else {
      fmt::print("{}\n", text);
    }
    std::fflush(stdout);
  };
  event({{"event", "ready"}, {"uri", instant->Uri()}, {"ready_seconds", ready}},
        fmt::format("export readable at {} after {:.2f} s; restoring {} of {} to {} behind it",
                    instant->Uri(), ready, request.archive, args.snapshot, request.target));
  auto report = instant->Wait();
  const double done = elapsed();
  Status restored = report.status();
  if (report.ok()) {
    const auto& s = report->archives[0].stats;
    event({{"event", "restored"}, {"target", request.target}, {"restored_seconds", done},
           {"ready_seconds", ready}, {"bytes", s.bytes}, {"fetched_bytes", s.fetched_bytes},
           {"chunks_restored", instant->device().restored_chunks()},
           {"chunks_written_by_clients", instant->device().client_chunks()}},
          fmt::format("restore complete after {:.2f} s (export readable after {:.2f} s): {} to {}, "
                      "fetched {}; {} chunks written by clients first, kept; the export goes on "
                      "until SIGINT or SIGTERM",
                      done, ready, HumanBytes(s.bytes), request.target, HumanBytes(s.fetched_bytes),
                      instant->device().client_chunks()));
  } else {
    ctx.logger->Error("restore failed after {:.2f} s: {}; the export goes on (reads from the "
                      "store) until SIGINT or SIGTERM",
                      done, report.status().message());
  }
  int sig = 0;
  sigwait(&signals, &sig);
  Status stopped = instant->Stop();
  const nbd::NbdServerStats n = instant->server_stats();
  fmt::print(stderr, "cairn restore --instant: stopped by signal {}: {} connections, {} requests, "
             "read {}, wrote {}\n", sig, n.connections, n.requests, HumanBytes(n.bytes_read),
             HumanBytes(n.bytes_written));
  CAIRN_RETURN_IF_ERROR(restored);
  return stopped;
}

void Run(Context& ctx, const RestoreArgs& args) {
  restore::RestoreRequest request;
  if (Status s = Check(args, &request); !s.ok()) return Fail(ctx, s);
  if (Status s = UseReconnectWindow(ctx); !s.ok()) return Fail(ctx, s);
  if (args.instant) {
    if (Status s = RunInstant(ctx, args, request); !s.ok()) Fail(ctx, s);
    return;
  }
  auto store = OpenRepoWithKey(ctx);
  if (!store.ok()) return Fail(ctx, store.status());
  auto spec = datastore::ParseSnapshotSpec(ctx.ns, args.snapshot);
  if (!spec.ok()) return Fail(ctx, spec.status());
  request.snapshot = *spec;
  std::unique_ptr<store::ChunkSource> injected;
  auto source = MaybeInject(args.bench.inject_latency, (*store)->source(), &injected);
  if (!source.ok()) return Fail(ctx, source.status());
  request.source = *source;
  std::unique_ptr<FaultInjectionEnv> slow_target;
  if (args.inject_write_latency_ms > 0) {
    slow_target = std::make_unique<FaultInjectionEnv>(ctx.env.get());
    slow_target->SetWriteLatencyMicros(static_cast<int64_t>(args.inject_write_latency_ms * 1000));
    request.target_env = slow_target.get();
  }
  pipeline::Progress progress;
  request.progress = &progress;
  Result<restore::RestoreReport> report = [&] {
    ProgressBar bar(progress, stderr, ShowProgress(ctx));
    return restore::RunRestore(**store, request);
  }();
  if (!report.ok()) return Fail(ctx, report.status());
  const pipeline::Bottleneck bottleneck = progress.stages.Analyze();
  if ((*store)->key() != nullptr && !report->encrypted) {
    ctx.logger->Warn(
        "snapshot {} is not encrypted: your key does not vouch for its content (anyone who can "
        "write to the datastore could have changed it)",
        report->snapshot.ToString());
  }
  bool to_stdout = request.target == "-" && !request.rehearse;
  const store::ConnectionSummary connections = request.source->Connections();
  if (ctx.json && !to_stdout) return PrintJsonReport(*report, request, connections, bottleneck);
  if (ctx.quiet) {  // the warnings only
    for (const auto& a : report->archives) {
      for (const std::string& w : a.tree.warnings) fmt::print(stderr, "cairn: warning: {}\n", w);
    }
    return;
  }
  // With the data on stdout, the summary goes to stderr.
  PrintHuman(to_stdout ? stderr : stdout, *report, request, connections);
  PrintBottleneck(to_stdout ? stderr : stdout, bottleneck);
}

}  // namespace

void RegisterRestore(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand(
      "restore",
      "restore an archive of a snapshot (or --all of them), in place, or as a rehearsal");
  auto args = std::make_shared<RestoreArgs>();
  AddRepoOptions(cmd, ctx);
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("SNAPSHOT", args->snapshot, "TYPE/ID/TIME or TYPE/ID/latest")->required();
  cmd->add_option("ARCHIVE", args->archive, "archive name, like disk0.img or root.tree");
  cmd->add_option("TARGET", args->target,
                  "new file, existing file or block device (with --overwrite or --in-place), "
                  "or - for stdout; for a tree, a new or empty directory");
  args->all = cmd->add_option("--all", args->all_dir,
                              "restore every archive of the snapshot into directory DIR at once")
                  ->expected(0, 1)
                  ->type_name("DIR");
  auto* overwrite =
      cmd->add_flag("--overwrite", args->overwrite, "write over an existing file or device");
  cmd->add_flag("--in-place", args->in_place,
                "on an existing file or device, read and hash it first and rewrite only the "
                "chunks that differ")
      ->excludes(overwrite);
  cmd->add_flag("--rehearse", args->rehearse,
                "fetch, decode and check everything but write nothing; report the speed a real "
                "restore would reach");
  cmd->add_option("--include", args->includes,
                  "trees only: restore just the entries matching PATTERN (a glob on the path "
                  "inside the archive, or on names when it has no '/'), with everything below "
                  "them and their parent directories; repeatable")
      ->type_name("PATTERN")
      ->allow_extra_args(false);
  cmd->add_option("--jobs", args->jobs, "reads in flight: auto (self-tuning, default) or N");
  cmd->add_option("--memory", args->memory,
                  "bytes of chunks in flight at most (default 256M; any image size fits)");
  cmd->add_flag("--instant", args->instant,
                "export the image over NBD at once and restore it to TARGET behind the export "
                "(boot a VM before the restore is done); serves until SIGINT or SIGTERM");
  cmd->add_option("--listen", args->listen,
                  "--instant: unix:PATH or HOST:PORT of the export (default 127.0.0.1:10809)");
  cmd->add_option("--cache", args->cache,
                  "--instant: decoded chunks kept for the export's reads (default 256M)");
  AddBenchOptions(cmd, &args->bench);
  cmd->add_option("--inject-write-latency", args->inject_write_latency_ms,
                  "add MS to every write to the target (a slow disk)")
      ->check(CLI::Range(0.0, 60000.0))
      ->group("");  // hidden, as --inject-latency: docs/BENCHMARKS.md
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
