// cairn: deduplicating backup of disk images and file trees.
// main() builds the defaults (Env, logger), registers one verb per file and
// maps the outcome to an exit code: 0 ok, 1 failure, 2 usage, 3 corruption.
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/cli_util.h"
#include "cli/cmd_task.h"

int main(int argc, char** argv) {
  using namespace cairn::cli;
  Context ctx;
  ctx.env = cairn::NewPosixEnv();
  ctx.logger = cairn::NewStderrLogger(cairn::LogLevel::kInfo);

  CLI::App app{"cairn: deduplicating backup of disk images and file trees"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  RegisterInit(app, ctx);
  RegisterKey(app, ctx);
  RegisterBackup(app, ctx);
  RegisterSnapshots(app, ctx);
  RegisterRestore(app, ctx);
  RegisterVerify(app, ctx);
  RegisterTask(app, ctx);
  RegisterTree(app, ctx);
  RegisterNbd(app, ctx);
  RegisterMount(app, ctx);
  RegisterPrune(app, ctx);
  RegisterGc(app, ctx);
  RegisterStatus(app, ctx);
  RegisterBenchmark(app, ctx);
  RegisterServe(app, ctx);
  RegisterToken(app, ctx);
  RegisterCert(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "cairn: error: {}\n", e.what());
    return kExitFailure;
  }
  return ctx.exit_code;
}
