// SnapshotTarget and RemoteBackend: where a new snapshot's files and chunks
// go. A SnapshotWriter (snapshot_writer.h) builds the manifest and hands the
// bytes to a target: the datastore directory itself (LocalSnapshotTarget),
// or a backup session on a server (remote/remote_backend.h), which applies
// the same rules on its side. The backup code never knows which.
#pragma once

#include <memory>
#include <string>

#include "base/bytes.h"
#include "base/status.h"
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

// What a datastore opened through a server uses instead of its own
// directory for chunks and new snapshots (remote/remote_repo.h).
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
};

}  // namespace cairn::datastore
