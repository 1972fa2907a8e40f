// cairn serve: the HTTPS server (docs/SERVER.md). Configuration from
// --config FILE, or for a quick start from --listen, --store NAME=PATH and
// --state-dir. Runs until SIGINT or SIGTERM, then stops gracefully.
//
// Under systemd (Type=notify, packaging/cairn.service) it tells the service
// manager through sd_notify(3): READY=1 once every listener is up (so units
// ordered after it start when clients can connect), STOPPING=1 when a
// signal arrives, and WATCHDOG=1 every half WatchdogSec= while the main
// loop runs. Logs go to stderr (journald priorities when stderr is the
// journal) or, with "log": FILE in the config, to that file, reopened on
// SIGHUP for logrotate.
#include <signal.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/cmd_sync.h"
#include "cli/process_env.h"
#include "net/http_server.h"
#include "net/tls.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/metrics_listener.h"
#include "server/server_config.h"
#include "server/tokens.h"

namespace cairn::cli {
namespace {

struct ServeArgs {
  std::string config;
  std::vector<std::string> listen;
  std::vector<std::string> stores;
  std::string state_dir;
  int64_t session_timeout_s = 0;  // 0: the config's (default 900)
  std::string metrics_listen;     // "": the config's
  int64_t metrics_refresh_s = 0;  // 0: the config's (default 300)
  double inject_task_latency_ms = 0;  // hidden: verify tasks' chunk reads sleep (tests)
};

Result<server::ServerConfig> BuildConfig(const ServeArgs& args) {
  server::ServerConfig config;
  if (!args.config.empty()) {
    if (!args.stores.empty() || !args.state_dir.empty() || !args.listen.empty()) {
      return InvalidArgumentError(
          "--config takes no --listen, --store or --state-dir: put them in the file");
    }
    CAIRN_ASSIGN_OR_RETURN(config, server::LoadServerConfig(args.config));
  } else {
    config.listen = args.listen;
    config.state_dir = args.state_dir;
    for (const std::string& flag : args.stores) {
      CAIRN_ASSIGN_OR_RETURN(auto store, server::ParseStoreFlag(flag));
      if (!config.stores.emplace(store.first, store.second).second) {
        return InvalidArgumentError(fmt::format("--store {}: the name is given twice", store.first));
      }
    }
  }
  if (args.session_timeout_s > 0) config.session_timeout_s = args.session_timeout_s;
  if (!args.metrics_listen.empty()) config.metrics_listen = args.metrics_listen;
  if (args.metrics_refresh_s > 0) config.metrics_refresh_s = args.metrics_refresh_s;
  CAIRN_RETURN_IF_ERROR(server::FinishConfig(&config));
  return config;
}

// "log": FILE: the server's log lines go to FILE (relative paths are taken
// from the state directory) at the level -q/-v chose. Returns the file
// logger (also set as ctx.logger), or null for "stderr".
Result<FileLogger*> OpenLog(Context& ctx, const server::ServerConfig& config) {
  if (config.log == "stderr") return static_cast<FileLogger*>(nullptr);
  const std::string path = config.log.starts_with('/') ? config.log : JoinPath(config.state_dir, config.log);
  CAIRN_RETURN_IF_ERROR(CreateDirs(*ctx.env, DirName(path)));
  const LogLevel level = ctx.quiet ? LogLevel::kWarning
                         : ctx.verbosity > 0 ? LogLevel::kDebug
                                             : LogLevel::kInfo;
  std::string error;
  std::unique_ptr<FileLogger> file = FileLogger::Open(path, level, &error);
  if (!file) return InvalidArgumentError(fmt::format("\"log\": {}", error));
  FileLogger* raw = file.get();
  ctx.logger = std::move(file);
  return raw;
}

// Waits for SIGINT or SIGTERM (returned), reopening the log file on SIGHUP
// and, when systemd's watchdog is on, pinging it every half interval.
int WaitForStop(Context& ctx, const sigset_t& signals, FileLogger* log_file) {
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &watchdog_usec) <= 0) watchdog_usec = 0;
  for (;;) {
    int sig = 0;
    if (watchdog_usec > 0) {
      const uint64_t half = watchdog_usec / 2;
      struct timespec timeout = {static_cast<time_t>(half / 1000000),
                                 static_cast<long>(half % 1000000) * 1000};
      sig = sigtimedwait(&signals, nullptr, &timeout);
      if (sig < 0) {  // timed out (or EINTR): still alive
        sd_notify(0, "WATCHDOG=1");
        continue;
      }
    } else if (sigwait(&signals, &sig) != 0) {
      continue;
    }
    if (sig != SIGHUP) return sig;
    if (log_file != nullptr && !log_file->Reopen()) {
      ctx.logger->Error("SIGHUP: cannot reopen log file {}: {}; still writing to the old one",
                        log_file->path(), std::strerror(errno));
    } else if (log_file != nullptr) {
      ctx.logger->Info("SIGHUP: log file {} reopened", log_file->path());
    }
  }
}

Status Serve(Context& ctx, const ServeArgs& args) {
  // SIGINT, SIGTERM and SIGHUP are taken by sigwait below. They are blocked
  // first of all: every thread started from here on (the datastores', the
  // API's, the server's) inherits the mask, and a thread started before it
  // would take a SIGTERM or SIGHUP with the default action and kill the
  // server without a graceful stop.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  CAIRN_ASSIGN_OR_RETURN(server::ServerConfig config, BuildConfig(args));
  // The state directory holds the token hashes, the TLS key, the tasks and
  // the audit log: made 0700, as `cairn token` makes it.
  CAIRN_RETURN_IF_ERROR(CreatePrivateDirs(config.state_dir)
                            .WithContext(fmt::format("state directory {}", config.state_dir)));
  CAIRN_ASSIGN_OR_RETURN(FileLogger * log_file, OpenLog(ctx, config));
  if (struct stat st; ::stat(config.state_dir.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
    ctx.logger->Warn("state directory {} is open to group or others (mode {:04o}): chmod 700 it",
                     config.state_dir, st.st_mode & 07777);
  }
  for (const std::string& file : {config.cert_file, config.key_file}) {
    CAIRN_RETURN_IF_ERROR(CreatePrivateDirs(DirName(file)));
  }
  CAIRN_RETURN_IF_ERROR(net::EnsureCertificate(config.cert_file, config.key_file));
  CAIRN_RETURN_IF_ERROR(net::CheckPrivateKeyFile(config.key_file));
  CAIRN_ASSIGN_OR_RETURN(std::string fingerprint, net::CertificateFingerprint(config.cert_file));
  CAIRN_ASSIGN_OR_RETURN(auto tokens, server::TokenStore::Open(config.state_dir));
  // The environments of object-store datastores (each caches its metadata
  // under STATE_DIR/cache); declared before the stores that refer to them.
  std::vector<std::unique_ptr<Env>> store_envs;
  std::map<std::string, std::unique_ptr<datastore::Datastore>> stores;
  for (const auto& [name, path] : config.stores) {
    Result<std::unique_ptr<datastore::Datastore>> store = NotFoundError("");
    if (s3store::IsS3Url(path)) {
      auto location = ResolveS3(ctx, path);
      if (!location.ok()) return location.status().WithContext(fmt::format("datastore '{}'", name));
      auto opened =
          s3store::OpenS3Datastore(NewProcessEnv(), *location, JoinPath(config.state_dir, "cache"));
      if (!opened.ok()) return opened.status().WithContext(fmt::format("datastore '{}'", name));
      store_envs.push_back(std::move(opened->env));
      store = std::move(opened->store);
    } else {
      store = datastore::Datastore::Open(*ctx.env, path);
    }
    if (!store.ok()) return store.status().WithContext(fmt::format("datastore '{}'", name));
    stores.emplace(name, std::move(*store));
  }
  std::vector<std::string> names;
  for (const auto& [name, path] : config.stores) names.push_back(name + "=" + path);
  std::map<std::string, datastore::Datastore*> store_ptrs;  // owned by the Api
  for (const auto& [name, store] : stores) store_ptrs.emplace(name, store.get());
  auto metrics = std::make_shared<server::ServerMetrics>();
  server::ApiOptions api_options = config.api;
  api_options.metrics = metrics.get();
  api_options.state_dir = config.state_dir;
  api_options.sessions = config.sessions;
  api_options.max_body_bytes = config.limits.max_body_bytes;
  // Sync jobs open their sources as `cairn sync --from` does; a server
  // source's metadata mirror goes under STATE_DIR/cache unless
  // CAIRN_CACHE_DIR says otherwise (set before any thread starts).
  if (!config.sync_jobs.empty()) {
    if (std::getenv("CAIRN_CACHE_DIR") == nullptr) {
      ::setenv("CAIRN_CACHE_DIR", JoinPath(config.state_dir, "cache").c_str(), 1);
    }
    api_options.sync_jobs = config.sync_jobs;
    const Context* serve_ctx = &ctx;
    api_options.open_sync_source = [serve_ctx](const server::SyncJob& job) {
      return OpenSyncSide(*serve_ctx, job.from, job.token, job.fingerprint, "from");
    };
    for (const server::SyncJob& job : config.sync_jobs) {
      ctx.logger->Info("sync job '{}': {} → datastore '{}', {}", job.name, job.from, job.store,
                       job.schedule ? "schedule \"" + job.schedule->text() + "\"" : "on demand");
    }
  }
  api_options.task_read_latency_us = static_cast<int64_t>(args.inject_task_latency_ms * 1000);
  auto api = std::make_shared<server::Api>(*ctx.env, *ctx.logger, *tokens, std::move(stores),
                                           std::move(api_options));

  net::ServerOptions http_options = config.ToServerOptions();
  // A backup session learns that its client is gone (a killed client's
  // group lock is released: server/backup_session.h).
  http_options.on_connection_closed = [api](uint64_t connection, bool by_client) {
    api->ConnectionClosed(connection, by_client);
  };
  CAIRN_ASSIGN_OR_RETURN(
      auto http,
      net::HttpServer::Start(
          http_options,
          [api, metrics](const net::HttpRequest& request, net::ResponseWriter& response) {
            server::MeteredWriter metered(response, *metrics, request);
            api->Handle(request, metered);
          },
          [api, metrics](const net::HttpRequest& header) {
            net::Admission a = api->Admit(header);
            if (a.status != 0) metrics->ObserveRefusal(a.status);
            return a;
          }));
  // Prometheus: GET /metrics on its own plain-HTTP address
  // (server/metrics_listener.h) and on the API port for a metrics or admin
  // token. The per-datastore figures are read in the background, from the
  // start with a metrics address, else from the first scrape on the API
  // port (a server nobody scrapes walks no chunk store).
  auto figures = std::make_shared<server::StoreFigures>(
      store_ptrs, std::chrono::seconds(config.metrics_refresh_s), *ctx.logger);
  auto figures_started = std::make_shared<std::once_flag>();
  auto render = [api = api.get(), metrics, http_server = http.get(), figures, figures_started] {
    std::call_once(*figures_started, [&] { figures->Start(); });
    server::ScrapeInputs in;
    in.http = http_server->stats();
    in.open_sessions = api->OpenSessions();
    in.tasks = api->Tasks();
    return server::RenderMetrics(*metrics, figures.get(), in);
  };
  api->SetMetricsRenderer(render);
  std::unique_ptr<server::MetricsListener> metrics_listener;
  std::string metrics_note;
  if (!config.metrics_listen.empty()) {
    std::call_once(*figures_started, [&] { figures->Start(); });
    CAIRN_ASSIGN_OR_RETURN(metrics_listener,
                           server::MetricsListener::Start(config.metrics_listen, render));
    metrics_note = fmt::format("; metrics on http://{}/metrics", metrics_listener->endpoint());
    ctx.logger->Info("metrics on http://{}/metrics (figures of each datastore every {} s)",
                     metrics_listener->endpoint(), config.metrics_refresh_s);
  }
  std::string urls;
  for (const std::string& e : http->endpoints()) urls += (urls.empty() ? "" : ", ") + ("https://" + e);
  ctx.logger->Info("serving {} with state in {}", fmt::join(names, ", "), config.state_dir);
  // One line on stdout that scripts (and the tests) wait for: the last thing
  // before READY, so whoever reads it finds the log started.
  fmt::print("cairn serve: listening on {} (certificate fingerprint {}){}\n", urls, fingerprint,
             metrics_note);
  std::fflush(stdout);
  sd_notifyf(0, "READY=1\nSTATUS=listening on %s", urls.c_str());
  const int sig = WaitForStop(ctx, signals, log_file);
  sd_notify(0, "STOPPING=1\nSTATUS=stopping: finishing requests in progress");
  ctx.logger->Info("signal {}: stopping (requests in progress get 10 s to finish)", sig);
  metrics_listener.reset();  // it asks the server for its figures
  http->Stop();
  api->SetMetricsRenderer(nullptr);  // the last reference to the figures: their thread ends
  figures.reset();
  auto stats = http->stats();
  ctx.logger->Info("stopped: {} connections ({} refused, {} evicted), {} requests ({} refused, {} "
                   "bad)",
                   stats.connections_accepted, stats.connections_refused,
                   stats.connections_evicted, stats.requests, stats.requests_refused,
                   stats.bad_requests);
  return Status::Ok();
}

}  // namespace

void RegisterServe(CLI::App& app, Context& ctx) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve datastores over HTTPS (docs/SERVER.md)");
  cmd->add_option("--config", args->config, "configuration file (JSON)");
  cmd->add_option("--listen", args->listen, "HOST:PORT to listen on (default 127.0.0.1:8007)");
  cmd->add_option("--store", args->stores, "a datastore to serve, as NAME=PATH (repeatable)");
  cmd->add_option("--state-dir", args->state_dir,
                  "directory for tokens and the TLS certificate");
  cmd->add_option("--session-timeout", args->session_timeout_s,
                  "seconds after which an idle backup session is aborted (default 900)")
      ->check(CLI::Range(int64_t{1}, int64_t{7 * 86400}));
  cmd->add_option("--metrics-listen", args->metrics_listen,
                  "HOST:PORT where Prometheus scrapes GET /metrics, plain HTTP (default: none; "
                  "docs/SERVER.md)");
  cmd->add_option("--metrics-refresh", args->metrics_refresh_s,
                  "seconds between reads of each datastore's figures for the metrics (default 300)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  cmd->add_option("--inject-task-latency", args->inject_task_latency_ms,
                  "add MS to every chunk read of a verify task, one read at a time (a test watches "
                  "one run)")
      ->check(CLI::Range(0.0, 60000.0))
      ->group("");  // hidden, as restore's --inject-write-latency
  cmd->callback([&ctx, args] {
    if (Status s = Serve(ctx, *args); !s.ok()) Fail(ctx, s);
  });
}

}  // namespace cairn::cli
