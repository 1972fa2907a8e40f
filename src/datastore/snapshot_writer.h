// SnapshotWriter: builds one snapshot's archive files and manifest and
// commits it atomically, into a SnapshotTarget (snapshot_target.h): the
// datastore directory, or a server's backup session for a datastore opened
// through a server.
//
// LocalSnapshotTarget::Begin() takes the group lock, registers the writer
// for garbage collection (before any chunk is looked up or inserted) and
// creates TYPE/ID/TIME/ (replacing an unfinished directory a killed backup
// left at that name). Archives are added one by one; Commit() makes every
// chunk durable (ChunkSink::Flush), fsyncs the directory and only then
// writes the manifest (temp → fsync → rename → fsync dir). Until that
// rename the snapshot does not exist for readers; a target destroyed before
// Commit() removes its directory. The server's backup session
// (server/backup_session.h) writes through the same LocalSnapshotTarget.
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

// The snapshot directory of a local datastore as a target.
class LocalSnapshotTarget final : public SnapshotTarget {
 public:
  // AlreadyExists when a finished snapshot with this name exists;
  // Unavailable when another backup of the group is running.
  // REQUIRES: `store` outlives the target.
  static Result<std::unique_ptr<LocalSnapshotTarget>> Begin(const Datastore& store,
                                                            const SnapshotRef& snap);
  ~LocalSnapshotTarget() override;

  // The caller (backup::RunBackup, the server's session) holds the base's
  // shared lock itself; nothing to do here.
  Status UseBase(const SnapshotRef&) override { return Status::Ok(); }
  Status WriteFile(const std::string& name, ByteSpan data) override;
  Status Commit(ByteSpan manifest) override;

  const std::string& dir() const { return dir_; }

 private:
  LocalSnapshotTarget(const Datastore& store, std::unique_ptr<FileLock> lock,
                      std::unique_ptr<FileLock> registration)
      : store_(store), lock_(std::move(lock)), registration_(std::move(registration)) {}

  const Datastore& store_;
  std::unique_ptr<FileLock> lock_;
  std::unique_ptr<FileLock> registration_;  // Datastore::RegisterWriter, for gc
  std::string dir_;
  bool committed_ = false;
};

class SnapshotWriter {
 public:
  // A local datastore: LocalSnapshotTarget::Begin; one opened through a
  // server: a backup session there (RemoteBackend::BeginSnapshot).
  // REQUIRES: `store` outlives the writer.
  static Result<std::unique_ptr<SnapshotWriter>> Begin(const Datastore& store,
                                                       const SnapshotRef& snap);
  ~SnapshotWriter();

  const SnapshotRef& snapshot() const { return snap_; }
  // See SnapshotTarget::UseBase.
  Status UseBase(const SnapshotRef& base) { return target_->UseBase(base); }

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
  SnapshotWriter(const Datastore& store, SnapshotRef snap, std::unique_ptr<SnapshotTarget> target)
      : store_(store), snap_(std::move(snap)), target_(std::move(target)) {}

  const Datastore& store_;
  SnapshotRef snap_;
  std::unique_ptr<SnapshotTarget> target_;
  index::Manifest manifest_;
};

// Removes the files of an unfinished snapshot directory, then the directory.
Status RemoveSnapshotDir(Env& env, const std::string& dir);

}  // namespace cairn::datastore
