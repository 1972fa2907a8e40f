// Shared plumbing of the CLI verbs: the context main() builds, repository
// opening, exit codes, human-readable sizes and speeds.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/logging.h"
#include "base/status.h"
#include "cli/key_options.h"
#include "datastore/datastore.h"
#include "pipeline/stage_meter.h"
#include "remote/remote_client.h"
#include "s3store/s3_repo.h"
#include "store/chunk_source.h"

namespace cairn::cli {

// Exit codes (DESIGN.md; README "Exit codes", cairn(1)): 0 ok, 1 failure,
// 2 usage error, 3 corruption found, and for scripts (restic's numbers):
// 10 the repository does not exist, 11 it is locked by another operation
// (try again later), 12 wrong passphrase or key (or a token the server
// refuses).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCorruption = 3;
inline constexpr int kExitNoRepository = 10;
inline constexpr int kExitLocked = 11;
inline constexpr int kExitWrongKey = 12;

// Thrown by the global options' parse-complete step (a bad config file, a
// bad --limit-upload) to end the run before the subcommand's callback;
// main() returns `code`. The message has been printed.
struct EarlyExit {
  int code;
};

struct Context {
  std::unique_ptr<Env> env;
  std::unique_ptr<Logger> logger;
  std::string repo;  // -r / CAIRN_REPO
  std::string token;        // --token / CAIRN_TOKEN (a server's NAME:SECRET)
  std::string fingerprint;  // --fingerprint / CAIRN_FINGERPRINT (a server's certificate)
  std::string ns;    // --ns
  bool json = false;
  KeyOptions key;  // --keyfile, --passphrase-file (commands that read or write content)
  int exit_code = kExitOk;

  // Global options (global_options.cc), on every command.
  bool quiet = false;        // -q: errors and warnings only, no progress, no report
  int verbosity = 0;         // -v, -vv: debug lines on stderr
  bool no_progress = false;  // --no-progress
  std::string limit_upload;    // --limit-upload RATE (or CAIRN_LIMIT_UPLOAD, config)
  std::string limit_download;  // --limit-download RATE
  remote::TransferLimits limits;  // built from the two above: shared by the whole run
  // How long a server's client retries across a restart (UseReconnectWindow).
  std::chrono::milliseconds reconnect_window{0};
  // Set when opening the repository failed because it does not exist
  // (exit 10 instead of 1).
  bool repo_missing = false;
};

// Maps a Status to an exit code: DataLoss → 3, InvalidArgument → 2,
// Aborted (locked) → 11, Unauthenticated (wrong passphrase or key) → 12,
// else 1.
int ExitCodeFor(const Status& s);
// True when a progress bar should be drawn: stderr is a terminal and
// neither -q nor --no-progress was given.
bool ShowProgress(const Context& ctx);
// Prints "cairn: error: <message>" on stderr and sets ctx.exit_code.
void Fail(Context& ctx, const Status& s);

// Creates `dir` and its missing parents, each new one mode 0700: the state
// directory holds secrets (token hashes, the TLS key). FailedPrecondition
// when `dir` is not a directory.
Status CreatePrivateDirs(const std::string& dir);

// Opens the datastore named by ctx.repo: a path, or https://HOST:PORT/STORE
// (a server: remote/remote_repo.h; ctx.env becomes the MirrorEnv over the
// one it had).
Result<std::unique_ptr<datastore::Datastore>> OpenRepo(Context& ctx);
// An s3:// URL with its options and the credentials (environment, then
// the credentials file).
Result<s3store::S3Location> ResolveS3(Context& ctx, const std::string& url);

// The server named by ctx.repo (https://HOST:PORT/STORE, or CAIRN_REPO), with
// the token (--token, CAIRN_TOKEN) and the fingerprint to pin (--fingerprint,
// CAIRN_FINGERPRINT, else the trusted-servers file). InvalidArgument when
// the repository is not a server.
struct ServerTarget {
  remote::RemoteUrl url;
  remote::Credentials credentials;
};
Result<ServerTarget> ServerTargetFor(Context& ctx);

// OpenRepo, then the key named by --keyfile or CAIRN_KEYFILE, unwrapped with
// its passphrase (cli/key_options.h), set on the datastore: backups are
// encrypted with it, encrypted snapshots read with it.
Result<std::unique_ptr<datastore::Datastore>> OpenRepoWithKey(Context& ctx);

// True when ctx.repo (or CAIRN_REPO, which ctx.repo then takes) names a
// server: the maintenance verbs then ask it (docs/SERVER.md, "Maintenance
// through the server") instead of opening a datastore.
bool RepoIsServer(Context& ctx);

// One call of the server's API on ctx.repo's datastore: `method` on
// /api/v1/stores/STORE/`suffix` (a query string included), the answer
// parsed as a JSON object. HTTP errors come back as RemoteClient maps them
// (403 PermissionDenied, 404 NotFound, …) with the server's message.
Result<nlohmann::json> CallStore(Context& ctx, std::string_view method, const std::string& suffix,
                                 ByteSpan body = {});

// The global options -q, -v, --no-progress, --limit-upload and
// --limit-download on `app` (they may be given before or after the
// subcommand: fallthrough), and the step that applies them once parsing is
// done: the logger's level, the rate limiters, and the client config file
// (a named repository for -r NAME; client_config.h). Errors end the run
// (EarlyExit) with exit 2.
void AddGlobalOptions(CLI::App& app, Context& ctx);

// Adds -r/--repo, --ns, --token, --fingerprint (and --json) to a subcommand.
void AddRepoOptions(CLI::App* cmd, Context& ctx);
void AddJsonOption(CLI::App* cmd, Context& ctx);

// "90s", "30m", "1h", "2d" (or plain seconds) → nanoseconds.
Result<int64_t> ParseDuration(const std::string& text);

// For the commands that read through a server (restore, verify): they
// retry for ctx.reconnect_window when the server goes away, and re-grant
// what they read when it comes back (docs/SERVER.md, "A server restart
// during a restore"). The window is $CAIRN_RECONNECT_TIMEOUT (a duration
// as ParseDuration takes, or 0 for 3 quick retries only), default 60 s.
// Call before OpenRepo.
Status UseReconnectWindow(Context& ctx);
inline constexpr std::chrono::seconds kDefaultReconnectWindow{60};

// Parses --jobs: "auto" → 0, or a number 1…1024.
Result<int> ParseJobs(const std::string& text);

// Hidden options for benchmarks (docs/BENCHMARKS.md), left out of --help:
// --inject-latency MS[:JITTER_MS] and --cpu-workers N.
struct BenchOptions {
  std::string inject_latency;
  int cpu_workers = 0;  // 0: one per core
};
void AddBenchOptions(CLI::App* cmd, BenchOptions* options);
// Wraps `base` when `spec` is set; returns the source to read from.
Result<store::ChunkSource*> MaybeInject(const std::string& spec, store::ChunkSource& base,
                                        std::unique_ptr<store::ChunkSource>* holder);

std::string HumanRate(uint64_t bytes, double secs);  // "640 MiB/s"
double MiBPerSecond(uint64_t bytes, double secs);

// How many connections to a server carried a run's chunks (restore, verify,
// backup): {"final", "max", "mean", "cap"} for --json, and the summary line
// "connections to the server: 3 (max 4, mean 2.7, cap 8)".
nlohmann::json ConnectionsJson(const store::ConnectionSummary& c);
std::string ConnectionsLine(const store::ConnectionSummary& c);

// Writes `j` to stdout as one JSON document.
void PrintJson(const nlohmann::json& j);

// The "bottleneck" object of a --json summary: the stage that limited the
// run, CPU use, and each stage's time and share (docs/ARCHITECTURE.md,
// "The stage meter"); null when nothing was measured. pipeline::BottleneckJson.
nlohmann::json BottleneckJson(const pipeline::Bottleneck& b);
// The summary's last line, "bottleneck: target writes (…)", on `out`;
// nothing when nothing was measured.
void PrintBottleneck(FILE* out, const pipeline::Bottleneck& b);

// The verbs, one file each (cmd_<verb>.cc).
void RegisterInit(CLI::App& app, Context& ctx);
// key create, change-passphrase, show, export, import
void RegisterKey(CLI::App& app, Context& ctx);
void RegisterBackup(CLI::App& app, Context& ctx);
void RegisterSnapshots(CLI::App& app, Context& ctx);
void RegisterRestore(CLI::App& app, Context& ctx);
void RegisterVerify(CLI::App& app, Context& ctx);
void RegisterTree(CLI::App& app, Context& ctx);  // ls, cat
void RegisterNbd(CLI::App& app, Context& ctx);
void RegisterMount(CLI::App& app, Context& ctx);
// prune, forget, protect, unprotect, notes
void RegisterPrune(CLI::App& app, Context& ctx);
void RegisterGc(CLI::App& app, Context& ctx);
// cairn sync --from SRC --to DST (cmd_sync.cc).
void RegisterSync(CLI::App& app, Context& ctx);
void RegisterStatus(CLI::App& app, Context& ctx);
void RegisterBenchmark(CLI::App& app, Context& ctx);
// cairn serve (cmd_serve.cc); token create|list|revoke and cert show (cmd_token.cc).
void RegisterServe(CLI::App& app, Context& ctx);
void RegisterToken(CLI::App& app, Context& ctx);
void RegisterCert(CLI::App& app, Context& ctx);
// cairn job run FILE: a backup job of the timer (cmd_job.cc).
void RegisterJob(CLI::App& app, Context& ctx);
// cairn generate man DIR | completion bash|zsh (hidden; doc_gen.cc): the man
// pages and shell completion, from the command tree itself.
void RegisterGenerate(CLI::App& app, Context& ctx);

// Every verb and the global options on `app` (main.cc).
void RegisterAll(CLI::App& app, Context& ctx);
// Runs one command line (arguments after the program name) with a fresh
// context, as main() does; returns the exit code. `cairn job run` runs its
// steps through it.
int RunCommandLine(const std::vector<std::string>& args);

inline constexpr char kVersion[] = "0.1.0";
inline constexpr char kDescription[] = "cairn: deduplicating backup of disk images and file trees";

}  // namespace cairn::cli
