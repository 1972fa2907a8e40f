// The cairn wire protocol: what a client and `cairn serve` say to each
// other, in one module below both (remote/ builds requests and reads
// answers with it; server/ recognises requests and writes answers with it),
// so that the two sides cannot drift apart. The spec is docs/SERVER.md
// ("HTTP API", "Batched chunk download", "Backup sessions") and
// docs/FORMAT.md ("Wire frames").
//
//   routes.h        the API's paths: builders for the client, ParseRoute for
//                   the server, and each route's body limit
//   chunk_frames.h  the binary frames of batched chunk downloads and uploads
//   messages.h      the JSON bodies both sides build and parse, and the
//                   mapping between HTTP statuses and Status codes
//
// Depends on base, format and crypto only: no HTTP machinery (net/), no
// datastore.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn::protocol {

inline constexpr int kApiVersion = 1;
inline constexpr std::string_view kApiPrefix = "/api/v1";

// Body limits of the routes that are not uploads of chunks or files.
inline constexpr size_t kSmallBodyLimit = 1 << 20;
inline constexpr size_t kManifestBodyLimit = 16 << 20;
// speedtest: what one request uploads, or asks to download.
inline constexpr size_t kSpeedTestMaxBytes = 4 << 20;

// --- the client's side: paths ------------------------------------------

// Percent-encodes a path segment or query value (unreserved characters kept).
std::string UrlEncode(std::string_view text);
// "?a=x&b=y", percent-encoded; "" for no parameters.
std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params);

std::string VersionPath();                 // GET
std::string StoresPath();                  // GET
std::string SpeedTestPath();               // POST (upload)
std::string SpeedTestPath(uint64_t bytes); // GET (download)
// "/api/v1/stores/STORE" + suffix ("/snapshots", "/chunks", …).
std::string StorePath(std::string_view store, std::string_view suffix = "");
std::string ChunksPath(std::string_view store);                        // POST: batch download
std::string ChunkPath(std::string_view store, std::string_view hex);   // GET: one chunk
std::string BackupPath(std::string_view store);                        // POST: a session
// "/api/v1/stores/STORE/backup/ID" + step ("", "/base", "/chunks", …).
std::string BackupSessionPath(std::string_view store, std::string_view session,
                              std::string_view step = "");
std::string TasksPath();
std::string TaskPath(std::string_view id);
std::string TaskLogPath(std::string_view id, size_t since);

// --- the server's side: which route a path is ----------------------------

enum class RouteKind {
  kNotFound,       // not a route: 404
  kVersion,        // GET /api/v1/version (the one route without a token)
  kSpeedTest,      // GET|POST speedtest
  kStores,         // GET stores
  kStoreOther,     // stores/S/… that is no route: 404 once S is checked
  kSnapshots,      // GET stores/S/snapshots
  kFile,           // GET stores/S/file
  kGrant,          // POST stores/S/grant
  kChunk,          // GET stores/S/chunk/HEX (id = HEX)
  kChunks,         // POST stores/S/chunks
  kBackupStart,    // POST stores/S/backup
  kBackupSession,  // DELETE stores/S/backup/ID (id)
  kBackupStep,     // POST stores/S/backup/ID/STEP (id, step: base, chunks, file, finish)
  kStatus,         // GET stores/S/status
  kPrune,          // POST stores/S/prune
  kSnapshot,       // DELETE stores/S/snapshot
  kProtected,      // PUT stores/S/protected
  kNotes,          // GET|PUT stores/S/notes
  kTree,           // GET stores/S/tree: a tree archive's directory, or one file (dashboard)
  kThroughput,     // GET stores/S/throughput: bytes in and out lately (dashboard)
  kStoreTask,      // POST stores/S/verify, stores/S/gc, stores/S/sync (step = the kind)
  kSyncJobs,       // GET stores/S/sync-jobs
  kTasks,          // GET tasks
  kTask,           // GET tasks/ID (id)
  kTaskSub,        // GET tasks/ID/SUB (id, step = SUB; only "log" is one)
};

struct Route {
  RouteKind kind = RouteKind::kNotFound;
  bool in_store = false;   // under stores/S (S may be empty: "stores//x")
  std::string_view store;  // routes under stores/S
  std::string_view id;     // a chunk's hex, a session's or a task's id
  std::string_view step;   // a backup step, a task kind, a task's sub-resource
};

// The route of a percent-decoded path ("/api/v1/stores/main/chunks").
// Views into `path`. Empty segments ("//", a trailing "/") match nothing.
Route ParseRoute(std::string_view path);

// The largest body `route` takes with `method`: chunk and file uploads take
// `max_upload` when the token may upload, a manifest kManifestBodyLimit,
// speedtest kSpeedTestMaxBytes, everything else kSmallBodyLimit.
size_t BodyLimit(const Route& route, std::string_view method, bool may_upload, size_t max_upload);

}  // namespace cairn::protocol
