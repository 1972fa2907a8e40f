// The JSON bodies both sides of the protocol build and parse, and how HTTP
// statuses map to Status codes (protocol/routes.h has the module's map).
//
// Decoders are strict: a body that is not the object described, a key of
// the wrong type, or (for prune) an unknown key is InvalidArgument with a
// message naming it; the server answers that with 400.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::protocol {

// --- errors --------------------------------------------------------------

// The answer's status for a Status of the server's code (Aborted, locked
// by another operation: 423; Unauthenticated: 401; ResourceExhausted: 507).
int HttpStatusFor(const Status& s);
// `{"error": message}` (bytes that are not UTF-8 replaced).
std::string ErrorBody(std::string_view message);
// The message of an error answer: its "error" string, else the first 200
// bytes of the body.
std::string ErrorMessageOf(ByteSpan body);
// The client's Status for an error answer: 400 InvalidArgument, 401
// Unauthenticated, 403 PermissionDenied, 404 NotFound, 409
// FailedPrecondition, 423 Aborted (locked by another operation), 429/503
// Unavailable (retried), other 5xx Internal, the rest Unknown.
Status StatusForHttp(int http_status, std::string message);
// Whether a client retries a request answered with `http_status`.
inline bool RetriedStatus(int http_status) { return http_status == 429 || http_status == 503; }

// --- backup sessions -----------------------------------------------------

// POST …/backup: the snapshot a session makes.
struct BackupStart {
  std::string ns;
  std::string type;
  std::string id;
  std::string time;  // RFC 3339
  // A repair session (`cairn sync --resync-corrupt`): chunks only, for the
  // existing snapshot `time`, which stays as it is (server/backup_session.h).
  bool repair = false;
};
std::string Encode(const BackupStart& m);
Result<BackupStart> DecodeBackupStart(ByteSpan body);
// Its answer: {"session": ID, "snapshot": …}.
Result<std::string> DecodeSessionId(ByteSpan body);

// POST …/backup/ID/base: the dedup base, a snapshot time of the same group.
std::string EncodeBase(std::string_view time);
Result<std::string> DecodeBase(ByteSpan body);

// --- prune ---------------------------------------------------------------

// POST …/prune: {"ns", "group", "keep": {"last", "hourly", "daily",
// "weekly", "monthly", "yearly", "utc"}, "dry_run"}, all optional.
struct PruneRequest {
  std::string ns;
  std::string group;  // "": every group of ns
  uint32_t last = 0, hourly = 0, daily = 0, weekly = 0, monthly = 0, yearly = 0;
  bool utc = false;
  bool dry_run = false;
};
std::string Encode(const PruneRequest& m);
Result<PruneRequest> DecodePruneRequest(ByteSpan body);

}  // namespace cairn::protocol
