// cairn token create NAME --store STORE --role ROLE (--state-dir DIR | --config FILE) [--json]
// cairn token list (--state-dir DIR | --config FILE) [--json]
// cairn token revoke NAME (--state-dir DIR | --config FILE) [--json]
// cairn cert show (--state-dir DIR | --config FILE) [--json]
//
// Administration of `cairn serve` on the server machine: API tokens in
// STATE_DIR/tokens.json (server/tokens.h; a running server picks changes up
// at the next request) and the fingerprint clients pin (net/tls.h).
// docs/SERVER.md is the guide.
#include <fmt/format.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/cli_util.h"
#include "datastore/snapshot_ref.h"
#include "net/tls.h"
#include "server/server_config.h"
#include "server/tokens.h"

namespace cairn::cli {
namespace {

struct StateArgs {
  std::string state_dir;
  std::string config;
};

void AddStateOptions(CLI::App* cmd, StateArgs* args) {
  cmd->add_option("--state-dir", args->state_dir,
                  "the server's state directory (tokens.json, tls/)");
  cmd->add_option("--config", args->config,
                  "the server's config file, for its state_dir (instead of --state-dir)");
}

// The server's configuration as far as the flags give it: the state
// directory always; stores, cert and key only with --config.
Result<server::ServerConfig> ResolveState(const StateArgs& args) {
  if (!args.state_dir.empty() && !args.config.empty()) {
    return InvalidArgumentError("give --state-dir or --config, not both");
  }
  if (!args.config.empty()) return server::LoadServerConfig(args.config);
  if (args.state_dir.empty()) {
    return InvalidArgumentError(
        "no state directory: pass --state-dir DIR (or --config FILE of the server)");
  }
  server::ServerConfig config;
  config.state_dir = args.state_dir;
  config.cert_file = JoinPath(args.state_dir, "tls/cert.pem");
  config.key_file = JoinPath(args.state_dir, "tls/key.pem");
  return config;
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

nlohmann::json TokenJson(const server::Token& t) {
  return {{"name", t.name},
          {"store", t.store},
          {"role", server::RoleName(t.role)},
          {"created", datastore::FormatRfc3339(t.created)},
          {"created_unix", t.created}};
}

// --- token create ----------------------------------------------------------------

struct CreateArgs {
  StateArgs state;
  std::string name;
  std::string store;
  std::string role;
};

void RunCreate(Context& ctx, const CreateArgs& args) {
  auto role = server::ParseRole(args.role);
  if (!role.ok()) return Fail(ctx, role.status());
  auto config = ResolveState(args.state);
  if (!config.ok()) return Fail(ctx, config.status());
  if (!args.state.config.empty() && args.store != "*" && config->stores.count(args.store) == 0) {
    std::string names;
    for (const auto& [name, path] : config->stores) names += (names.empty() ? "" : ", ") + name;
    return Fail(ctx, InvalidArgumentError(fmt::format("store '{}' is not in {} (its stores: {})",
                                                      args.store, args.state.config, names)));
  }
  if (Status s = CreatePrivateDirs(config->state_dir); !s.ok()) return Fail(ctx, s);
  auto tokens = server::TokenStore::Open(config->state_dir);
  if (!tokens.ok()) return Fail(ctx, tokens.status());
  auto credential = (*tokens)->Create(args.name, args.store, *role);
  if (!credential.ok()) return Fail(ctx, credential.status());
  if (ctx.json) {
    return PrintJson({{"name", args.name},
                      {"store", args.store},
                      {"role", server::RoleName(*role)},
                      {"token", *credential}});
  }
  fmt::print("{}\n", *credential);
  std::fflush(stdout);
  fmt::print(stderr,
             "cairn: token '{}' ({} on store {}) created; the line above is shown only once: "
             "give it to the client as CAIRN_TOKEN or --token\n",
             args.name, server::RoleName(*role), args.store);
}

// --- token list --------------------------------------------------------------------

void RunList(Context& ctx, const StateArgs& args) {
  auto config = ResolveState(args);
  if (!config.ok()) return Fail(ctx, config.status());
  auto tokens = server::TokenStore::Open(config->state_dir);
  if (!tokens.ok()) return Fail(ctx, tokens.status());
  const auto list = (*tokens)->List();
  if (ctx.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : list) out.push_back(TokenJson(t));
    return PrintJson(out);
  }
  if (list.empty()) {
    fmt::print("no tokens in {} (make one with `cairn token create`)\n",
               JoinPath(config->state_dir, "tokens.json"));
    return;
  }
  fmt::print("{:<24} {:<16} {:<7} {}\n", "name", "store", "role", "created");
  for (const auto& t : list) {
    fmt::print("{:<24} {:<16} {:<7} {}\n", t.name, t.store, server::RoleName(t.role),
               datastore::FormatRfc3339(t.created));
  }
}

// --- token revoke ------------------------------------------------------------------

struct RevokeArgs {
  StateArgs state;
  std::string name;
};

void RunRevoke(Context& ctx, const RevokeArgs& args) {
  auto config = ResolveState(args.state);
  if (!config.ok()) return Fail(ctx, config.status());
  auto tokens = server::TokenStore::Open(config->state_dir);
  if (!tokens.ok()) return Fail(ctx, tokens.status());
  if (Status s = (*tokens)->Revoke(args.name); !s.ok()) return Fail(ctx, s);
  if (ctx.json) return PrintJson({{"name", args.name}, {"revoked", true}});
  fmt::print("revoked token '{}'\n", args.name);
}

// --- cert show ---------------------------------------------------------------------

void RunCertShow(Context& ctx, const StateArgs& args) {
  auto config = ResolveState(args);
  if (!config.ok()) return Fail(ctx, config.status());
  const std::string& cert = config->cert_file;
  const std::string& key = config->key_file;
  bool created = false;
  if (!Exists(cert)) {
    // The pair the server would make at its first start, at the same paths,
    // so the fingerprint can be handed out before the server runs.
    for (const std::string& path : {cert, key}) {
      if (Status s = CreatePrivateDirs(DirName(path)); !s.ok()) return Fail(ctx, s);
    }
    if (Status s = net::EnsureCertificate(cert, key); !s.ok()) return Fail(ctx, s);
    created = true;
    std::fflush(stdout);
    fmt::print(stderr, "cairn: no certificate yet: created a self-signed one at {} (key {})\n",
               cert, key);
  }
  auto fingerprint = net::CertificateFingerprint(cert);
  if (!fingerprint.ok()) return Fail(ctx, fingerprint.status());
  if (ctx.json) {
    return PrintJson({{"certificate", cert}, {"fingerprint", *fingerprint}, {"created", created}});
  }
  fmt::print("certificate  {}\n", cert);
  fmt::print("fingerprint  {}\n", *fingerprint);
}

}  // namespace

void RegisterToken(CLI::App& app, Context& ctx) {
  auto* token = app.add_subcommand("token", "manage the API tokens of `cairn serve`");
  token->require_subcommand(1);
  {
    auto* cmd = token->add_subcommand(
        "create", "make a token and print NAME:SECRET (the secret is shown only this once)");
    auto args = std::make_shared<CreateArgs>();
    AddJsonOption(cmd, ctx);
    AddStateOptions(cmd, &args->state);
    cmd->add_option("NAME", args->name, "token name: 1 to 64 of A-Z a-z 0-9 . _ -")->required();
    cmd->add_option("--store", args->store, "the datastore it may use, or '*' for all")->required();
    cmd->add_option("--role", args->role,
                    "reader, backup, verify, admin or metrics (GET /metrics only)")
        ->required();
    cmd->callback([&ctx, args] { RunCreate(ctx, *args); });
  }
  {
    auto* cmd = token->add_subcommand("list", "list tokens (never their secrets)");
    auto args = std::make_shared<StateArgs>();
    AddJsonOption(cmd, ctx);
    AddStateOptions(cmd, args.get());
    cmd->callback([&ctx, args] { RunList(ctx, *args); });
  }
  {
    auto* cmd = token->add_subcommand("revoke", "delete a token; it stops working at once");
    auto args = std::make_shared<RevokeArgs>();
    AddJsonOption(cmd, ctx);
    AddStateOptions(cmd, &args->state);
    cmd->add_option("NAME", args->name, "token name")->required();
    cmd->callback([&ctx, args] { RunRevoke(ctx, *args); });
  }
}

void RegisterCert(CLI::App& app, Context& ctx) {
  auto* cert = app.add_subcommand("cert", "the TLS certificate of `cairn serve`");
  cert->require_subcommand(1);
  auto* cmd = cert->add_subcommand(
      "show", "print the certificate's SHA-256 fingerprint (creating the certificate if absent)");
  auto args = std::make_shared<StateArgs>();
  AddJsonOption(cmd, ctx);
  AddStateOptions(cmd, args.get());
  cmd->callback([&ctx, args] { RunCertShow(ctx, *args); });
}

}  // namespace cairn::cli
