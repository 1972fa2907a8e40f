// Backup sessions of `cairn serve` (docs/SERVER.md, "Backup sessions"): how a
// client adds a snapshot to a datastore on the server.
//
//   begin   POST   …/backup            {"ns","type","id","time"} → {"session": ID}
//   base    POST   …/backup/ID/base    {"time"}: the dedup base, a finished
//                                      snapshot of the same group
//   chunks  POST   …/backup/ID/chunks  frames digest[32] | length u32 LE | blob
//   file    POST   …/backup/ID/file?name=NAME   one index or blob file
//   finish  POST   …/backup/ID/finish  the encoded manifest (index.json.blob)
//   abort   DELETE …/backup/ID
//
// A repair session (begin with "repair": true, `cairn sync --resync-corrupt`)
// names an existing snapshot and takes chunks only (no base, file or
// finish; DELETE ends it): the chunks a verify found bad, uploaded again
// under the same rules, so a proved plain upload replaces a damaged copy and
// an encrypted one only fills a gap. It takes the token's rights for a
// backup of that group (a backup token: its own group), holds the snapshot
// shared, and changes nothing else of it.
//
// The rules, as in PBS, against a client that may be hostile (one host of
// many, compromised):
//   - References: an index the session uploads may list only chunks of its
//     base snapshot's indexes, plain chunks it uploaded and the server proved
//     (decoded and hashed to their digest), and encrypted chunks it uploaded
//     (the server has no key: it checks their CRC and nothing more). Nobody
//     can make a snapshot out of digests it merely knows.
//   - Reads: a backup token reads only chunks of its open sessions' bases,
//     and only when the stored chunk is in the base's mode (plain, or
//     encrypted under the base manifest's key print). An upload never grants
//     a read: a fake upload under another host's digest gives nothing back.
//   - Storing: a proved plain upload replaces a stored copy that is not a
//     valid plain copy of its digest (a fake "encrypted" blob planted under
//     it, or a damaged one); an encrypted upload never replaces anything.
//     What the upload answer says is the same whether a chunk was new.
//   - Modes: one session uploads chunks of one key (or none); at finish an
//     encrypted manifest may reference no proved plain upload and must name
//     that key, a plain one no encrypted upload.
//   - Cost: frames of digests the session already holds are skipped
//     without decoding; what plain frames decode to is capped per request
//     and per session.
//   - Ownership: a new group becomes the token's at finish, not before, so
//     an aborted session claims nothing; a token may hold a bounded number
//     of open sessions and of groups.
// The snapshot appears only at finish (LocalSnapshotTarget::Commit, the same
// code as a local backup); a session aborted, or idle past the timeout,
// removes its directory and unlocks its group. A killed client: the session
// remembers the connections its requests came on; when the client closes or
// resets the last of them (its process died) and no request comes within
// orphan_grace, the session is aborted, and a new backup of the same group
// takes an orphaned session's lock at once. Connections the server closes
// for idleness (a slow client between uploads) orphan nothing.
//
// Thread safety: all methods may be called concurrently; requests of one
// session (parallel chunk uploads) too.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/logging.h"
#include "crypto/crypt_config.h"
#include "datastore/snapshot_writer.h"
#include "server/digest_set.h"

namespace cairn::server {

struct SessionLimits {
  // A session with no request for this long is aborted.
  std::chrono::seconds timeout{900};
  // A session whose client closed its last connection is aborted when no
  // request came for this long after (the client may reconnect: a retry).
  std::chrono::milliseconds orphan_grace{10'000};
  // How long a Begin for a group that an open session holds waits for that
  // session to be orphaned (its client's close may still be on its way).
  std::chrono::milliseconds takeover_wait{2'000};
  // What the plain chunks of one upload request, and of one session, may
  // decode to (the server decompresses and hashes them). A client batches
  // by both stored and raw bytes (remote_backend.cc) to stay below.
  uint64_t max_decoded_per_request = uint64_t{1} << 30;
  uint64_t max_decoded_per_session = uint64_t{16} << 40;
  // Open sessions per token, and groups a backup token may own per store.
  int max_sessions_per_token = 16;
  int max_groups_per_token = 1000;
};

// The upload answer: what was received, never what was new to the store
// (that would tell a client which digests exist).
struct UploadResult {
  uint64_t chunks = 0;  // frames in the request
  uint64_t bytes = 0;   // their stored bytes
};

// How a chunk is stored: plain, or encrypted under a key print (the first
// 8 bytes of the key's fingerprint, in every encrypted blob's header).
struct ChunkMode {
  bool encrypted = false;
  std::array<uint8_t, crypto::kShortFingerprintSize> key_print{};
  bool operator==(const ChunkMode&) const = default;
};

class BackupSession;

class SessionRegistry {
 public:
  SessionRegistry(Logger& logger, SessionLimits limits);
  SessionRegistry(Logger& logger, std::chrono::seconds timeout)
      : SessionRegistry(logger, SessionLimits{.timeout = timeout}) {}
  ~SessionRegistry();  // aborts every open session

  // Opens a session for `snap` in `store` (named `store_name`) for the
  // token `token`. `check_owner` (backup tokens): the group must be the
  // token's, or new (no owner, no snapshot); it becomes the token's at
  // finish. Otherwise (admin) the owner file is written at finish when the
  // group has none. PermissionDenied for a group of another token;
  // ResourceExhausted past the token's quota of sessions or groups.
  // `connection`: the HTTP connection the request came on (0: none known).
  // An orphaned session of the same group is aborted first (its lock is
  // stale); a live one makes this Begin fail with Aborted, saying which
  // session holds the group and since when it sent nothing.
  // `repair`: a repair session of the existing snapshot `snap` (above):
  // NotFound when it does not exist; with `check_owner`, the group must be
  // the token's. It waits for no other session of the group.
  Result<std::string> Begin(const std::string& token, const std::string& store_name,
                            const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                            bool check_owner, uint64_t connection = 0, bool repair = false);

  // The session `id` of `token` in `store_name`: NotFound otherwise (also
  // for another token's session, so ids cannot be probed).
  Result<std::shared_ptr<BackupSession>> Find(const std::string& id, const std::string& token,
                                              const std::string& store_name,
                                              uint64_t connection = 0);
  // The HTTP server's net::ServerOptions::on_connection_closed.
  void ConnectionClosed(uint64_t connection, bool by_client);

  Status UseBase(BackupSession& session, const std::string& time);
  // InvalidArgument for a malformed frame or a plain chunk that is not its
  // digest; OutOfRange past the decoded-bytes caps.
  // `on_chunk`, when set, is told each chunk's stored size and the seconds
  // its check and insert took (the server's metrics).
  Result<UploadResult> UploadChunks(
      BackupSession& session, ByteSpan frames,
      const std::function<void(uint64_t bytes, double seconds)>& on_chunk = nullptr);
  Status PutFile(BackupSession& session, const std::string& name, ByteSpan data);
  // Checks the manifest against the session and commits. The session ends
  // (whatever the outcome: a rejected manifest aborts it).
  Result<datastore::SnapshotRef> Finish(const std::string& id, ByteSpan manifest);
  void Abort(const std::string& id);

  // The modes a chunk `id` must be stored in for `token` to read it in
  // `store_name`: one per open session of the token whose base holds `id`
  // (the tree backup reads its base's metadata). Empty: it may not.
  std::vector<ChunkMode> ReadableModes(const std::string& token, const std::string& store_name,
                                       const crypto::Digest& id);
  bool HasSession(const std::string& token, const std::string& store_name);

  size_t open_sessions();

 private:
  void Reap();
  // Under mu_: the session's request came on `connection`.
  static void Attach(BackupSession& s, uint64_t connection);
  // Aborts an orphaned session of `snap`'s group in `store_name` (waiting
  // up to takeover_wait for one that is not yet); "" or a description of
  // the live session that holds the group.
  std::string ReleaseOrphanOf(const std::string& store_name, const datastore::SnapshotRef& snap,
                              const std::string& new_id, const std::string& token);
  // Proves and stores one frame (chunk_upload.cc).
  Status AdmitChunk(BackupSession& s, const crypto::Digest& id, ByteSpan blob,
                    uint64_t* request_decoded);
  // Begin's part under the group lock: the target, the owner checks and
  // the group quota. True when the session will claim a new group.
  // Counts `raw_size` decoded bytes against the request's and the
  // session's caps (OutOfRange past either).
  Status Charge(BackupSession& s, uint64_t raw_size, uint64_t* request_decoded);
  Result<bool> OpenTarget(BackupSession& s, const datastore::Datastore& store, bool check_owner);
  // A repair session's part of Begin: the snapshot, its owner, its locks.
  Status OpenRepair(BackupSession& s, const datastore::Datastore& store, bool check_owner);
  Status CheckQuota(const std::string& token, const std::string& store_name,
                    const datastore::Datastore& store, bool new_group);

  Logger& logger_;
  const SessionLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<BackupSession>> sessions_;
  std::thread reaper_;
};

// Names of the files of a snapshot directory a client may read or upload:
// the manifest, archive indexes and blobs, the verify state. Nothing with a
// '/', nothing hidden, only known suffixes.
bool IsSnapshotFileName(std::string_view name);

// The owner file of a group: the name of the token that created it.
inline constexpr char kOwnerFileName[] = "owner";
// The owner named in GROUP/owner, or "" when there is none.
std::string ReadGroupOwner(Env& env, const std::string& group_dir);

}  // namespace cairn::server
