// cairn benchmark [-r REPO] [--keyfile KEY] [--json] [--seconds S]
//
// How fast this machine runs each stage of cairn's chunk path, per core and
// on all cores, plain and encrypted (AES-256-GCM, HMAC-SHA256 ids, and the
// whole per-chunk check restore runs with a key), beside the reference
// figures of proxmox-backup-client benchmark; with -r, also chunk insert and read rates on the datastore's
// file system and a restore rehearsal of its newest image; with --keyfile,
// encrypted snapshots made with that key are read and rehearsed too (without
// it they are skipped, and the notes say so); with -r https://HOST:PORT/STORE,
// the upload and download rates to that server over TLS (perf/machine_bench.h
// says how it measures).
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "cli/cli_util.h"
#include "cli/key_options.h"
#include "perf/machine_bench.h"
#include "remote/remote_api.h"
#include "remote/remote_client.h"

namespace cairn::cli {
namespace {

struct BenchmarkArgs {
  double seconds = 1;
};

// The tls rows against a server: every measuring thread gets its own
// client, so its own connection, opened (TLS handshake) before the clock
// starts.
constexpr size_t kBuffer = 4 << 20;  // per speedtest request

Status AddServerRows(const ServerTarget& target, perf::MachineBenchOptions* options) {
  remote::RemoteClient probe(target.url, target.credentials);
  CAIRN_RETURN_IF_ERROR(probe.Check());
  options->server = fmt::format("https://{}:{}", target.url.host, target.url.port);
  auto buffer = std::make_shared<Bytes>(kBuffer);
  uint64_t x = 0x2545f4914f6cdd1d;
  for (auto& c : *buffer) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<uint8_t>(x);
  }
  auto connect = [target]() -> Result<std::shared_ptr<remote::RemoteClient>> {
    auto client = std::make_shared<remote::RemoteClient>(target.url, target.credentials);
    CAIRN_RETURN_IF_ERROR(client->Check());
    return client;
  };
  options->tls_upload = [connect, buffer](int) -> Result<perf::WorkFn> {
    CAIRN_ASSIGN_OR_RETURN(auto client, connect());
    return perf::WorkFn([client, buffer]() -> Result<uint64_t> {
      return remote::SpeedTestUpload(*client, *buffer);
    });
  };
  options->tls_download = [connect](int) -> Result<perf::WorkFn> {
    CAIRN_ASSIGN_OR_RETURN(auto client, connect());
    auto scratch = std::make_shared<ReadBuffer>();
    return perf::WorkFn([client, scratch]() -> Result<uint64_t> {
      return remote::SpeedTestDownload(*client, kBuffer, scratch.get());
    });
  };
  return Status::Ok();
}

void Run(Context& ctx, const BenchmarkArgs& args) {
  // The datastore (and its key) is opened first, so a wrong -r or key
  // fails before any work. Without a datastore a key has nothing to read:
  // the CPU rows use a benchmark key of their own.
  std::unique_ptr<datastore::Datastore> store;
  perf::MachineBenchOptions options;
  options.seconds = args.seconds;
  if (ctx.repo.empty()) {
    if (const char* env_repo = std::getenv("CAIRN_REPO")) ctx.repo = env_repo;
  }
  if (remote::IsRemoteUrl(ctx.repo)) {
    auto target = ServerTargetFor(ctx);
    if (!target.ok()) return Fail(ctx, target.status());
    if (Status s = AddServerRows(*target, &options); !s.ok()) return Fail(ctx, s);
  } else if (!ctx.repo.empty()) {
    auto opened = OpenRepoWithKey(ctx);
    if (!opened.ok()) return Fail(ctx, opened.status());
    store = std::move(*opened);
  }
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
                  "directory inside it that is removed afterwards; a server "
                  "(https://HOST:PORT/STORE): its TLS upload and download rates");
  cmd->add_option("--token", ctx.token, "a server's API token NAME:SECRET (or set CAIRN_TOKEN)");
  cmd->add_option("--fingerprint", ctx.fingerprint,
                  "the server's certificate fingerprint (or set CAIRN_FINGERPRINT)");
  AddKeyOptions(cmd, &ctx.key);
  AddJsonOption(cmd, ctx);
  cmd->add_option("--seconds", args->seconds, "duration of each measurement (default 1)")
      ->check(CLI::Range(0.001, 600.0));
  cmd->callback([&ctx, args] { Run(ctx, *args); });
}

}  // namespace cairn::cli
