// The server's API as calls, for the commands that ask a server rather
// than open a datastore through it (docs/SERVER.md, "Maintenance through
// the server", "Server-side verify and tasks"): status, prune, forget,
// protect, notes, tasks, and the TLS speed test of `cairn benchmark`. Each
// builds its request with the protocol module (protocol/) and returns the
// server's JSON answer, errors mapped as RemoteClient maps them.
//
// Thread safety: as RemoteClient (any thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "protocol/messages.h"
#include "remote/remote_client.h"

namespace cairn::remote {

// `method` on the store's `suffix` (a query string included), the answer
// parsed as a JSON object (DataLoss when it is not one).
Result<nlohmann::json> CallStoreJson(RemoteClient& client, std::string_view method,
                                     const std::string& suffix, ByteSpan body = {});

// POST …/prune: what `cairn prune --json` prints, from the server.
Result<nlohmann::json> PruneOnServer(RemoteClient& client, const protocol::PruneRequest& request);

// POST …/stores/S/{verify,gc}: starts a task with `options` (JSON). The
// task's id; *already_running when one of that kind ran already (409 with
// its id, which is returned); FailedPrecondition when a task of the other
// kind runs.
Result<std::string> StartTask(RemoteClient& client, std::string_view kind,
                              const nlohmann::json& options, bool* already_running);
// GET tasks/ID: the task's status (DataLoss when malformed).
Result<nlohmann::json> GetTask(RemoteClient& client, const std::string& id);
// GET tasks/ID/log?since=N: the log lines from line N, as text.
Result<Bytes> GetTaskLog(RemoteClient& client, const std::string& id, size_t since);
// GET tasks: {"tasks": [...]} (DataLoss when malformed).
Result<nlohmann::json> ListTasks(RemoteClient& client);

// `cairn benchmark -r https://…`'s tls rows: one upload of `data`, and one
// download of `bytes` into `scratch` (reused; the chunk path reads into a
// pipeline's buffer the same way). Each returns the bytes moved.
Result<uint64_t> SpeedTestUpload(RemoteClient& client, ByteSpan data);
Result<uint64_t> SpeedTestDownload(RemoteClient& client, uint64_t bytes, ReadBuffer* scratch);

}  // namespace cairn::remote
