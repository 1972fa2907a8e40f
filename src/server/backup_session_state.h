// The state of one backup session (server/backup_session.h), shared by the
// registry (backup_session.cc) and the chunk admission (chunk_upload.cc).
// Not part of the server's interface.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "datastore/snapshot_writer.h"
#include "server/backup_session.h"
#include "server/digest_set.h"

namespace cairn::server {

class BackupSession {
 public:
  std::string id;
  std::string token;
  std::string store_name;
  const datastore::Datastore* store = nullptr;
  datastore::SnapshotRef snap;
  // Guarded by the registry's mutex:
  // Begin is done (until then the session only holds its token's slot).
  bool started = false;
  // The group had no owner at Begin: the token becomes its owner at finish.
  bool claims_group = false;
  // A repair session: chunks only, for an existing snapshot (no target).
  bool repair = false;
  std::chrono::steady_clock::time_point last_used;
  // The open connections its requests came on, and since when it has none
  // because the client closed the last one (its process died, or it cut
  // the connection): the session is orphaned then (backup_session.h).
  std::set<uint64_t> connections;
  std::optional<std::chrono::steady_clock::time_point> orphaned_since;

  std::mutex mu;  // guards the members below
  std::unique_ptr<datastore::LocalSnapshotTarget> target;
  std::unique_ptr<FileLock> base_lock;
  // A repair session's: the snapshot's shared lock (a forget waits) and its
  // writer registration (gc keeps what it uploads meanwhile).
  std::unique_ptr<FileLock> repair_lock;
  std::unique_ptr<FileLock> writer;
  bool has_base = false;
  ChunkMode base_mode;                  // how the base's chunks must be stored to be read
  DigestSet base;                       // the base's chunks: referenced, and read (in base_mode)
  DigestSet proven;                     // plain uploads the server decoded to their digest
  DigestSet unproven;                   // encrypted uploads (CRC checked): referenced, never read
  std::optional<ChunkMode> upload_key;  // the key print of the encrypted uploads
  uint64_t decoded_bytes = 0;           // plain frames decoded so far
  struct FileSum {
    crypto::Digest csum{};
    uint64_t size = 0;
    // What the file needs of the session: an index referencing proved
    // plain uploads or encrypted uploads; a blob file's own mode.
    bool uses_base = false;
    bool uses_proven = false;
    bool uses_unproven = false;
    std::optional<ChunkMode> blob_mode;
  };
  std::map<std::string, FileSum> files;
};

}  // namespace cairn::server
