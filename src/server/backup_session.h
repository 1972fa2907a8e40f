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
// The rules, as in PBS: a session may reference (in an index it uploads)
// only chunks it uploaded itself or that its base snapshot's indexes hold,
// so nobody can probe the datastore for a chunk by digest; every
// unencrypted chunk is re-hashed and must match its digest, an encrypted
// one must pass its CRC; the manifest must describe exactly the files
// uploaded, with their checksums. The snapshot appears only at finish
// (LocalSnapshotTarget::Commit, the same code as a local backup); a session
// aborted, or idle past the timeout (a killed client), removes its
// directory and unlocks its group.
//
// Thread safety: all methods may be called concurrently; requests of one
// session (parallel chunk uploads) too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_set>

#include "base/env.h"
#include "base/logging.h"
#include "datastore/snapshot_writer.h"

namespace cairn::server {

using DigestSet = std::unordered_set<crypto::Digest, crypto::DigestHash>;

// Chunk upload frames: digest[32] | length u32 LE | payload[length].
inline constexpr size_t kUploadFrameHeaderSize = 32 + 4;

struct UploadResult {
  uint64_t chunks = 0;    // in the request
  uint64_t inserted = 0;  // new to the datastore
  uint64_t stored_bytes = 0;
};

class BackupSession;

class SessionRegistry {
 public:
  SessionRegistry(Logger& logger, std::chrono::seconds timeout);
  ~SessionRegistry();  // aborts every open session

  // Opens a session for `snap` in `store` (named `store_name`) for the
  // token `token`. `check_owner`: the group must be new (it then becomes the
  // token's) or already the token's (backup tokens); otherwise the owner
  // file is only written when the group has none. Returns the session id.
  Result<std::string> Begin(const std::string& token, const std::string& store_name,
                            const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                            bool check_owner);

  // The session `id` of `token` in `store_name`: NotFound otherwise (also
  // for another token's session, so ids cannot be probed).
  Result<std::shared_ptr<BackupSession>> Find(const std::string& id, const std::string& token,
                                              const std::string& store_name);

  Status UseBase(BackupSession& session, const std::string& time);
  Result<UploadResult> UploadChunks(BackupSession& session, ByteSpan frames);
  Status PutFile(BackupSession& session, const std::string& name, ByteSpan data);
  // Checks the manifest against the session and commits. The session ends
  // (whatever the outcome: a rejected manifest aborts it).
  Result<datastore::SnapshotRef> Finish(const std::string& id, ByteSpan manifest);
  void Abort(const std::string& id);

  // Whether `token` has an open session in `store_name` whose base or
  // uploads hold `id`: a backup token may read those chunks (the tree
  // backup reads its base's metadata), and no others.
  bool MayRead(const std::string& token, const std::string& store_name, const crypto::Digest& id);
  bool HasSession(const std::string& token, const std::string& store_name);

  size_t open_sessions();

 private:
  void Reap();

  Logger& logger_;
  std::chrono::seconds timeout_;
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
