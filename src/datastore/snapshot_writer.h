// SnapshotWriter: writes one snapshot directory and commits it atomically.
//
// Begin() takes the group lock, registers the writer for garbage
// collection (before any chunk is looked up or inserted) and creates TYPE/ID/TIME/ (replacing an
// unfinished directory a killed backup left at that name). Archives are
// added one by one; Commit() makes every chunk durable (ChunkSink::Flush),
// fsyncs the directory and only then writes the manifest (temp → fsync →
// rename → fsync dir). Until that rename the snapshot does not exist for
// readers; a writer destroyed before Commit() removes its directory.
//
// Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "datastore/datastore.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"

namespace cairn::datastore {

class SnapshotWriter {
 public:
  // AlreadyExists when a finished snapshot with this name exists;
  // Unavailable when another backup of the group is running.
  // REQUIRES: `store` outlives the writer.
  static Result<std::unique_ptr<SnapshotWriter>> Begin(const Datastore& store,
                                                       const SnapshotRef& snap);
  ~SnapshotWriter();

  const SnapshotRef& snapshot() const { return snap_; }

  // Writes NAME.img.fidx and records the archive.
  Status AddImage(const std::string& name, const index::FixedIndex& idx);
  // Writes NAME.tree.meta.didx and NAME.tree.data.didx and records the archive.
  Status AddTree(const std::string& name, const index::DynamicIndex& meta,
                 const index::DynamicIndex& data);
  // Encodes `plaintext` as NAME.blob and records the archive.
  Status AddBlob(const std::string& name, ByteSpan plaintext);
  // Flushes chunks, then writes the manifest. The writer is done afterwards.
  Status Commit(const std::string& created_by);

 private:
  SnapshotWriter(const Datastore& store, SnapshotRef snap, std::unique_ptr<FileLock> lock,
                 std::unique_ptr<FileLock> registration)
      : store_(store),
        snap_(std::move(snap)),
        lock_(std::move(lock)),
        registration_(std::move(registration)) {}

  Status WriteArchiveFile(const std::string& file, ByteSpan data);

  const Datastore& store_;
  SnapshotRef snap_;
  std::unique_ptr<FileLock> lock_;
  std::unique_ptr<FileLock> registration_;  // Datastore::RegisterWriter, for gc
  std::string dir_;
  index::Manifest manifest_;
  bool committed_ = false;
};

// Removes the files of an unfinished snapshot directory, then the directory.
Status RemoveSnapshotDir(Env& env, const std::string& dir);

}  // namespace cairn::datastore
