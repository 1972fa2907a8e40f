// The options every command takes (-q, -v, --no-progress, --limit-upload,
// --limit-download) and the step that applies them, with the client config
// file, once the command line is parsed (cli_util.h, AddGlobalOptions).
#include <cstdlib>

#include <fmt/format.h>

#include "base/rate_limiter.h"
#include "cli/cli_util.h"
#include "cli/client_config.h"

namespace cairn::cli {
namespace {

const char* GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

[[noreturn]] void EndRun(Context& ctx, const Status& s) {
  Fail(ctx, s);
  throw EarlyExit{ctx.exit_code};
}

// The subcommand that runs (the deepest one given).
const CLI::App* SelectedCommand(const CLI::App& app) {
  const CLI::App* cmd = &app;
  while (!cmd->get_subcommands().empty()) cmd = cmd->get_subcommands().front();
  return cmd;
}

// Fills `*field` from `value` unless a flag or one of `envs` already set it.
void Default(std::string* field, const std::string& value,
             std::initializer_list<const char*> envs = {}) {
  if (!field->empty() || value.empty()) return;
  for (const char* env : envs) {
    if (GetEnv(env)) return;
  }
  *field = value;
}

// -r NAME (or CAIRN_REPO=NAME, or [defaults] repository) → the named
// repository's URL and settings, below flags and environment variables.
void ApplyNamedRepository(Context& ctx, const ClientConfig& config) {
  std::string name = ctx.repo;
  if (name.empty()) {
    if (const char* env = GetEnv("CAIRN_REPO")) name = env;
  }
  if (name.empty()) name = config.default_repository;
  const RepositoryEntry* entry = config.Find(name);
  if (entry == nullptr) return;
  ctx.logger->Debug("repository '{}' from {}: {}", name, config.path, entry->url);
  ctx.repo = entry->url;
  const RepositorySettings& s = entry->settings;
  Default(&ctx.ns, s.ns);
  Default(&ctx.token, s.token, {"CAIRN_TOKEN"});
  Default(&ctx.fingerprint, s.fingerprint, {"CAIRN_FINGERPRINT"});
  Default(&ctx.key.keyfile, s.keyfile, {"CAIRN_KEYFILE"});
  // One passphrase source at most comes from the file, and only when none
  // is given otherwise.
  const bool given = !ctx.key.passphrase_file.empty() || !ctx.key.password_command.empty() ||
                     GetEnv("CAIRN_PASSPHRASE") || GetEnv("CAIRN_PASSPHRASE_FILE") ||
                     GetEnv("CAIRN_PASSWORD_COMMAND");
  if (!given) {
    ctx.key.passphrase_file = s.passphrase_file;
    if (s.passphrase_file.empty()) ctx.key.password_command = s.password_command;
  }
  Default(&ctx.limit_upload, s.limit_upload, {"CAIRN_LIMIT_UPLOAD"});
  Default(&ctx.limit_download, s.limit_download, {"CAIRN_LIMIT_DOWNLOAD"});
}

std::shared_ptr<RateLimiter> MakeLimiter(Context& ctx, std::string text, const char* env,
                                         const std::string& from_config, const char* option) {
  if (text.empty()) {
    if (const char* v = GetEnv(env)) text = v;
  }
  if (text.empty()) text = from_config;
  if (text.empty()) return nullptr;
  auto rate = ParseByteRate(text, option);
  if (!rate.ok()) EndRun(ctx, rate.status());
  ctx.logger->Debug("{}: {} bytes per second", option, *rate);
  return std::make_shared<RateLimiter>(*rate);
}

void Apply(CLI::App& app, Context& ctx) {
  LogLevel level = ctx.quiet ? LogLevel::kWarning
                   : ctx.verbosity > 0 ? LogLevel::kDebug
                                       : LogLevel::kInfo;
  ctx.logger = NewStderrLogger(level, StderrIsJournal() ? LogStyle::kJournal : LogStyle::kPlain);
  const CLI::App* cmd = SelectedCommand(app);
  // The config file matters to commands that open a repository.
  ClientConfig config;
  if (cmd->get_option_no_throw("--repo") != nullptr) {
    const std::string path = DefaultClientConfigPath();
    if (!path.empty()) {
      // $CAIRN_CONFIG must exist; the default file may be absent.
      auto loaded = LoadClientConfig(path, /*optional=*/GetEnv("CAIRN_CONFIG") == nullptr);
      if (!loaded.ok()) EndRun(ctx, loaded.status());
      config = std::move(*loaded);
      if (!config.path.empty()) ctx.logger->Debug("config file {}", config.path);
    }
    ApplyNamedRepository(ctx, config);
  }
  ctx.limits.upload = MakeLimiter(ctx, ctx.limit_upload, "CAIRN_LIMIT_UPLOAD", config.limit_upload,
                                  "--limit-upload");
  ctx.limits.download = MakeLimiter(ctx, ctx.limit_download, "CAIRN_LIMIT_DOWNLOAD",
                                    config.limit_download, "--limit-download");
}

}  // namespace

void AddGlobalOptions(CLI::App& app, Context& ctx) {
  // Given before or after the subcommand (`cairn -q backup …`, `cairn
  // backup … -q`): subcommands inherit fallthrough.
  app.fallthrough();
  const std::string group = "Global options";
  auto* quiet = app.add_flag("-q,--quiet", ctx.quiet,
                             "print only errors and warnings: no progress bar, no report of what "
                             "was done (listings and --json output stay)")
                    ->group(group);
  app.add_flag("-v,--verbose", ctx.verbosity,
               "say more: what is opened, which key, limits, config (repeatable: -vv)")
      ->group(group)
      ->excludes(quiet);
  app.add_flag("--no-progress", ctx.no_progress, "draw no progress bar, even on a terminal")
      ->group(group);
  app.add_option("--limit-upload", ctx.limit_upload,
                 "at most RATE bytes per second sent to a server or object store, all "
                 "connections together (like 20M; K, M, G = KiB, MiB, GiB; or "
                 "CAIRN_LIMIT_UPLOAD)")
      ->type_name("RATE")
      ->group(group);
  app.add_option("--limit-download", ctx.limit_download,
                 "at most RATE bytes per second received from a server or object store (or "
                 "CAIRN_LIMIT_DOWNLOAD)")
      ->type_name("RATE")
      ->group(group);
  app.parse_complete_callback([&app, &ctx] { Apply(app, ctx); });
}

}  // namespace cairn::cli
