// SnapshotTarget and RemoteBackend: where a new snapshot's files and chunks
// go. A SnapshotWriter (snapshot_writer.h) builds the manifest and hands the
// bytes to a target: the datastore directory itself (LocalSnapshotTarget),
// or a backup session on a server (remote/remote_backend.h), which applies
// the same rules on its side. The backup code never knows which.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/status.h"
#include "crypto/sha256.h"
#include "datastore/snapshot_ref.h"

namespace cairn::store {
class ChunkSource;
class ChunkSink;
}  // namespace cairn::store

namespace cairn::datastore {

// One snapshot being written. Destroyed before Commit(), it removes what it
// wrote: no snapshot appears.
//
// Thread safety: one thread at a time.
class SnapshotTarget {
 public:
  virtual ~SnapshotTarget() = default;

  // The previous snapshot of the group whose chunks this backup reuses
  // without storing them again (its dedup base). Called at most once,
  // before the first chunk or file. A server refuses references to chunks
  // that neither this base nor the session itself holds.
  virtual Status UseBase(const SnapshotRef& base) = 0;
  // Writes one archive file (index or blob) of the snapshot.
  virtual Status WriteFile(const std::string& name, ByteSpan data) = 0;
  // Makes every chunk durable, then writes `manifest` (the encoded
  // index.json.blob) last: from then on the snapshot exists.
  virtual Status Commit(ByteSpan manifest) = 0;
};

// What a datastore uses instead of its own directory for chunks and new
// snapshots: a server (remote/remote_repo.h), or an object store
// (s3store/s3_repo.h), whose chunks are objects and whose metadata the
// local directory caches.
class RemoteBackend {
 public:
  virtual ~RemoteBackend() = default;
  // Where restore, verify and the tree backup's base read chunks.
  virtual store::ChunkSource& Source() = 0;
  // Where a backup's chunks go; only valid while a target from
  // BeginSnapshot is alive.
  virtual store::ChunkSink& Sink() = 0;
  // Opens a backup session for `snap` (AlreadyExists, Unavailable and
  // PermissionDenied as the server says).
  virtual Result<std::unique_ptr<SnapshotTarget>> BeginSnapshot(const SnapshotRef& snap) = 0;

  // --- Chunk maintenance, for backends that own their chunks (an object
  // store; a server does its own). ---

  // True when gc, status and verify's quarantine work on this backend's
  // chunks through the calls below.
  virtual bool OwnsChunks() const { return false; }
  // Calls `each` for every stored chunk object: its name ("<64 hex>", or
  // "<64 hex>.bad" when quarantined) and size. `each` may run on several
  // threads at once.
  using ChunkVisitor = std::function<void(std::string_view name, uint64_t size)>;
  virtual Status ListChunks(const ChunkVisitor& each);
  // Removes the chunk objects named as ListChunks names them. Missing ones
  // count as removed.
  virtual Status RemoveChunks(std::span<const std::string> names);
  // Moves a damaged chunk aside ("<id>.bad"), so the next backup of the same
  // data stores it again. Returns where it went.
  virtual Result<std::string> Quarantine(const crypto::Digest& id);
  // Where chunks live, for messages ("s3://bucket/prefix").
  virtual std::string Describe() const { return "remote store"; }
};

}  // namespace cairn::datastore
