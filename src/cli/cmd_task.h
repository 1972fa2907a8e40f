// Tasks on a cairn server (docs/SERVER.md, "Server-side verify and tasks"):
// `cairn task show|list`, and the client side of `cairn verify --on-server`
// and `cairn gc -r https://…`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "remote/remote_client.h"

namespace cairn::cli {

// POST …/`kind` ("verify" or "gc") with `options` (the JSON body): the new
// task's id. When a task of the same kind runs on the store already, its id,
// with *already_running; when one of another kind runs (one task per
// datastore), FailedPrecondition naming it.
Result<std::string> StartServerTask(const ServerTarget& target, std::string_view kind,
                                    const nlohmann::json& options, bool* already_running);

// Polls task `id` until it has ended: a progress bar when stderr is a
// terminal, else a line every few seconds; with `print_log`, the task's log
// lines on stdout as they come. Returns the final status.
Result<nlohmann::json> FollowTask(remote::RemoteClient& client, const std::string& id,
                                  bool print_log);

// The client side of a server task (`verify --on-server`, `gc -r https://…`):
// starts it (or joins the one of the same kind already running, saying so),
// then either prints its id (`detach`: as {"task", "already_running"} with
// --json) and returns null, or follows it to its end and returns its final
// status. On an error, Fail() has been called and the result is null too.
std::optional<nlohmann::json> RunServerTask(Context& ctx, const ServerTarget& target,
                                            std::string_view kind, const nlohmann::json& options,
                                            bool detach);

// Prints an ended task's problems, result and summary the way the local
// verify does (or the JSON with --json) and sets the exit code: 0 ok,
// 3 damage found, 1 error.
void PrintTaskOutcome(Context& ctx, const nlohmann::json& task);

void RegisterTask(CLI::App& app, Context& ctx);
// `cairn sync-job list|run`: a server's sync jobs (docs/SERVER.md, "Sync jobs").
void RegisterSyncJob(CLI::App& app, Context& ctx);

}  // namespace cairn::cli
