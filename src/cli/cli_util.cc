#include "cli/cli_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "base/fault_injection_env.h"
#include "cli/progress_bar.h"
#include "cli/process_env.h"
#include "net/tls.h"
#include "pipeline/bottleneck_json.h"
#include "remote/remote_api.h"
#include "remote/remote_repo.h"
#include "store/injecting_source.h"

namespace cairn::cli {

std::unique_ptr<Env> NewProcessEnv() {
  const char* pattern = std::getenv(kReadEioVariable);
  if (pattern == nullptr || *pattern == '\0') return NewPosixEnv();
  auto env = std::make_unique<FaultInjectionEnv>(NewPosixEnv());
  env->FailReadsMatching(pattern);
  return env;
}

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return kExitOk;
    case StatusCode::kDataLoss: return kExitCorruption;
    case StatusCode::kInvalidArgument: return kExitUsage;
    case StatusCode::kAborted: return kExitLocked;
    case StatusCode::kUnauthenticated: return kExitWrongKey;
    default: return kExitFailure;
  }
}

void Fail(Context& ctx, const Status& s) {
  std::fflush(stdout);
  fmt::print(stderr, "cairn: error: {}\n", s.message());
  ctx.exit_code = ctx.repo_missing && s.code() == StatusCode::kNotFound ? kExitNoRepository
                                                                        : ExitCodeFor(s);
}

bool ShowProgress(const Context& ctx) {
  return !ctx.quiet && !ctx.no_progress && ProgressBar::StderrIsTerminal();
}

Result<ServerTarget> ServerTargetFor(Context& ctx) {
  if (ctx.repo.empty()) {
    if (const char* env_repo = std::getenv("CAIRN_REPO")) ctx.repo = env_repo;
  }
  if (!remote::IsRemoteUrl(ctx.repo)) {
    return InvalidArgumentError(fmt::format(
        "'{}' is not a server: this takes -r https://HOST:PORT/STORE", ctx.repo));
  }
  ServerTarget t;
  CAIRN_ASSIGN_OR_RETURN(t.url, remote::ParseRemoteUrl(ctx.repo));
  t.credentials.token = ctx.token;
  if (t.credentials.token.empty()) {
    if (const char* token = std::getenv("CAIRN_TOKEN")) t.credentials.token = token;
  }
  std::string fingerprint = ctx.fingerprint;
  if (fingerprint.empty()) {
    if (const char* f = std::getenv("CAIRN_FINGERPRINT")) fingerprint = f;
  }
  if (!fingerprint.empty()) {
    CAIRN_ASSIGN_OR_RETURN(t.credentials.fingerprint, net::NormalizeFingerprint(fingerprint));
  } else {
    CAIRN_ASSIGN_OR_RETURN(t.credentials.fingerprint,
                           remote::LookupTrustedFingerprint(remote::TrustedServersPath(),
                                                            t.url.host, t.url.port));
  }
  return t;
}

Result<s3store::S3Location> ResolveS3(Context& ctx, const std::string& url) {
  auto getenv = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  CAIRN_ASSIGN_OR_RETURN(s3store::S3Location location,
                         s3store::ResolveS3Url(url, getenv, ctx.env.get()));
  location.config.upload_limit = ctx.limits.upload;
  location.config.download_limit = ctx.limits.download;
  return location;
}

namespace {

// The datastore a repository names, opened; `missing` set when it does not
// exist (NotFound from the open itself, not from a later read).
Result<std::unique_ptr<datastore::Datastore>> OpenRepoAt(Context& ctx) {

  if (s3store::IsS3Url(ctx.repo)) {
    CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ctx.ns));
    CAIRN_ASSIGN_OR_RETURN(s3store::S3Location location, ResolveS3(ctx, ctx.repo));
    auto opened = s3store::OpenS3Datastore(std::move(ctx.env), location, remote::CacheRoot());
    if (!opened.ok()) {
      ctx.env = NewProcessEnv();
      return opened.status();
    }
    ctx.env = std::move(opened->env);
    return std::move(opened->store);
  }
  if (remote::IsRemoteUrl(ctx.repo)) {
    CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ctx.ns));
    CAIRN_ASSIGN_OR_RETURN(ServerTarget target, ServerTargetFor(ctx));
    const remote::RemoteUrl& url = target.url;
    auto client = std::make_shared<remote::RemoteClient>(url, target.credentials, ctx.limits);
    client->SetReconnectWindow(ctx.reconnect_window);
    std::string mirror = remote::MirrorDir(remote::CacheRoot(), url);
    ctx.env = std::make_unique<remote::MirrorEnv>(std::move(ctx.env), client, mirror);
    return remote::OpenMirror(*ctx.env, client, mirror);
  }
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ctx.ns));
  return datastore::Datastore::Open(*ctx.env, ctx.repo);
}

std::string_view RepoKind(const std::string& repo) {
  return s3store::IsS3Url(repo) ? "object storage" : remote::IsRemoteUrl(repo) ? "server" : "local";
}

}  // namespace

Result<std::unique_ptr<datastore::Datastore>> OpenRepo(Context& ctx) {
  if (ctx.repo.empty()) {
    if (const char* env_repo = std::getenv("CAIRN_REPO")) ctx.repo = env_repo;
  }
  if (ctx.repo.empty()) {
    return InvalidArgumentError(
        "no repository given: pass -r PATH|URL|NAME, set CAIRN_REPO, or name a default "
        "repository in the config file");
  }
  ctx.logger->Debug("opening {} datastore {}", RepoKind(ctx.repo), ctx.repo);
  auto store = OpenRepoAt(ctx);
  if (!store.ok()) {
    ctx.repo_missing = store.status().code() == StatusCode::kNotFound;
    return store.status();
  }
  ctx.logger->Debug("datastore {} open", (*store)->DisplayName());
  return store;
}

Result<std::unique_ptr<datastore::Datastore>> OpenRepoWithKey(Context& ctx) {
  CAIRN_ASSIGN_OR_RETURN(auto store, OpenRepo(ctx));
  CAIRN_ASSIGN_OR_RETURN(auto key, LoadKey(ctx.key));
  if (key) ctx.logger->Debug("encryption key {} loaded", key->FingerprintText());
  store->SetKey(std::move(key));
  return store;
}

bool RepoIsServer(Context& ctx) {
  if (ctx.repo.empty()) {
    if (const char* env_repo = std::getenv("CAIRN_REPO")) ctx.repo = env_repo;
  }
  return remote::IsRemoteUrl(ctx.repo);
}

Result<nlohmann::json> CallStore(Context& ctx, std::string_view method, const std::string& suffix,
                                 ByteSpan body) {
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ctx.ns));
  CAIRN_ASSIGN_OR_RETURN(ServerTarget target, ServerTargetFor(ctx));
  remote::RemoteClient client(target.url, target.credentials, ctx.limits);
  return remote::CallStoreJson(client, method, suffix, body);
}

void AddRepoOptions(CLI::App* cmd, Context& ctx) {
  cmd->add_option("-r,--repo", ctx.repo,
                  "datastore path or https://HOST:PORT/STORE (or set CAIRN_REPO)");
  cmd->add_option("--ns", ctx.ns, "namespace, like site1/rack2 (default: the root)");
  cmd->add_option("--token", ctx.token, "a server's API token NAME:SECRET (or set CAIRN_TOKEN)");
  cmd->add_option("--fingerprint", ctx.fingerprint,
                  "the server's certificate fingerprint to trust (or set CAIRN_FINGERPRINT)");
}

void AddJsonOption(CLI::App* cmd, Context& ctx) {
  cmd->add_flag("--json", ctx.json, "print the result as JSON on stdout");
}

Result<int64_t> ParseDuration(const std::string& text) {
  double value = -1;
  size_t used = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string_view unit = std::string_view(text).substr(used);
  double seconds = unit == "" || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600
                   : unit == "d"             ? 86400
                                             : -1;
  if (used == 0 || seconds < 0 || !(value > 0) || value * seconds > 1e9) {
    return InvalidArgumentError(
        fmt::format("duration '{}' is not like 90s, 30m, 1h or 2d", text));
  }
  return static_cast<int64_t>(value * seconds * 1e9);
}

Status UseReconnectWindow(Context& ctx) {
  ctx.reconnect_window = kDefaultReconnectWindow;
  const char* text = std::getenv("CAIRN_RECONNECT_TIMEOUT");
  if (text == nullptr || *text == '\0') return Status::Ok();
  if (std::string_view(text) == "0") {
    ctx.reconnect_window = std::chrono::milliseconds(0);
    return Status::Ok();
  }
  auto nanos = ParseDuration(text);
  if (!nanos.ok()) return nanos.status().WithContext("CAIRN_RECONNECT_TIMEOUT");
  ctx.reconnect_window = std::chrono::milliseconds(*nanos / 1000000);
  return Status::Ok();
}

Result<int> ParseJobs(const std::string& text) {
  if (text == "auto") return 0;
  int n = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || p != text.data() + text.size() || n < 1 || n > 1024) {
    return InvalidArgumentError(
        fmt::format("--jobs '{}' must be 'auto' or a number from 1 to 1024", text));
  }
  return n;
}

void AddBenchOptions(CLI::App* cmd, BenchOptions* options) {
  // Hidden (empty group): for the sweeps in bench/, see docs/BENCHMARKS.md.
  cmd->add_option("--inject-latency", options->inject_latency,
                  "add MS[:JITTER_MS] to every chunk read")
      ->group("");
  cmd->add_option("--cpu-workers", options->cpu_workers, "checking threads (default: one per core)")
      ->check(CLI::Range(1, 1024))
      ->group("");
}

Result<store::ChunkSource*> MaybeInject(const std::string& spec, store::ChunkSource& base,
                                        std::unique_ptr<store::ChunkSource>* holder) {
  if (spec.empty()) return &base;
  CAIRN_ASSIGN_OR_RETURN(store::InjectionOptions options, store::ParseLatencySpec(spec));
  *holder = std::make_unique<store::InjectingSource>(base, options);
  return holder->get();
}

double MiBPerSecond(uint64_t bytes, double secs) {
  return secs > 0 ? static_cast<double>(bytes) / (1 << 20) / secs : 0;
}

nlohmann::json ConnectionsJson(const store::ConnectionSummary& c) {
  return {{"final", c.final_count}, {"max", c.max_count}, {"mean", c.mean_count}, {"cap", c.cap}};
}

std::string ConnectionsLine(const store::ConnectionSummary& c) {
  return fmt::format("connections to the server: {} (max {}, mean {:.1f}, cap {})", c.final_count,
                     c.max_count, c.mean_count, c.cap);
}

std::string HumanRate(uint64_t bytes, double secs) {
  if (secs <= 0) return "-";
  return fmt::format("{:.0f} MiB/s", MiBPerSecond(bytes, secs));
}

void PrintJson(const nlohmann::json& j) { std::cout << j.dump(2) << std::endl; }

nlohmann::json BottleneckJson(const pipeline::Bottleneck& b) {
  return pipeline::BottleneckJson(b);
}

void PrintBottleneck(FILE* out, const pipeline::Bottleneck& b) {
  if (b.measured) fmt::print(out, "bottleneck: {}\n", b.Describe());
}

Status CreatePrivateDirs(const std::string& dir) {
  std::filesystem::path path = std::filesystem::path(dir).lexically_normal();
  std::filesystem::path partial;
  for (const auto& part : path) {
    partial /= part;
    if (part.empty() || part == "/" || part == ".") continue;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoToStatus(errno, fmt::format("creating directory {}", partial.string()));
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoToStatus(errno, fmt::format("stat {}", dir));
  if (!S_ISDIR(st.st_mode))
    return FailedPreconditionError(fmt::format("{} is not a directory", dir));
  return Status::Ok();
}

}  // namespace cairn::cli
