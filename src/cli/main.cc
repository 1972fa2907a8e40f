// cairn: deduplicating backup of disk images and file trees.
// main() builds the defaults (Env, logger), registers one verb per file and
// maps the outcome to an exit code (cli_util.h: 0 ok, 1 failure, 2 usage,
// 3 corruption, 10 no repository, 11 locked, 12 wrong passphrase or key).
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/cmd_task.h"
#include "cli/process_env.h"

namespace cairn::cli {

void RegisterAll(CLI::App& app, Context& ctx) {
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  AddGlobalOptions(app, ctx);
  RegisterInit(app, ctx);
  RegisterKey(app, ctx);
  RegisterBackup(app, ctx);
  RegisterSnapshots(app, ctx);
  RegisterRestore(app, ctx);
  RegisterVerify(app, ctx);
  RegisterTask(app, ctx);
  RegisterSyncJob(app, ctx);
  RegisterTree(app, ctx);
  RegisterNbd(app, ctx);
  RegisterMount(app, ctx);
  RegisterPrune(app, ctx);
  RegisterGc(app, ctx);
  RegisterSync(app, ctx);
  RegisterStatus(app, ctx);
  RegisterBenchmark(app, ctx);
  RegisterServe(app, ctx);
  RegisterToken(app, ctx);
  RegisterCert(app, ctx);
  RegisterJob(app, ctx);
  RegisterGenerate(app, ctx);
}

int RunCommandLine(const std::vector<std::string>& args) {
  Context ctx;
  ctx.env = NewProcessEnv();
  ctx.logger = NewStderrLogger(LogLevel::kInfo);
  if (const char* eio = std::getenv(kReadEioVariable); eio != nullptr && *eio != '\0') {
    ctx.logger->Warn("test hook {}={}: every read of a file whose path contains it fails with EIO",
                     kReadEioVariable, eio);
  }
  CLI::App app{kDescription, "cairn"};
  RegisterAll(app, ctx);
  // CLI11 takes the arguments in reverse order.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  } catch (const EarlyExit& e) {
    return e.code;
  } catch (const std::exception& e) {
    fmt::print(stderr, "cairn: error: {}\n", e.what());
    return kExitFailure;
  }
  return ctx.exit_code;
}

}  // namespace cairn::cli

int main(int argc, char** argv) {
  return cairn::cli::RunCommandLine(std::vector<std::string>(argv + 1, argv + argc));
}
