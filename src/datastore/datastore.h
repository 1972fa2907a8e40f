// Datastore: a directory holding a chunk store and the snapshots that
// reference it.
//
//   STORE/.cairn-datastore           marker + format version (JSON), written last by Init
//   STORE/.chunks/XXX/<id>           chunks (store/local_chunk_store.h)
//   STORE/[ns/A/]TYPE/ID/.lock       group lock, held by a running backup
//   STORE/[ns/A/]TYPE/ID/TIME/       one snapshot:
//       index.json.blob              manifest, written last: no manifest, no snapshot
//       NAME.img.fidx, NAME.blob     archives
//       NAME.tree.meta.didx          a tree archive's metadata stream index
//       NAME.tree.data.didx          ... and its payload stream index
//       verify.json.blob             last verify result (kept apart from the manifest)
//
// Readers never take locks; a backup holds its group's lock for its whole
// run, so two backups of one group cannot interleave.
//
// Thread safety: const after Open; methods may be called concurrently.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/env.h"
#include "datastore/snapshot_ref.h"
#include "datastore/snapshot_target.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "store/local_chunk_store.h"

namespace cairn::datastore {

enum class VerifyOutcome { kOk, kFailed };

struct VerifyState {
  VerifyOutcome outcome = VerifyOutcome::kOk;
  int64_t time = 0;  // Unix seconds when the verify run started
  uint64_t errors = 0;
};

class Datastore {
 public:
  // Creates a datastore at `path`, which must not exist or be an empty
  // directory. The marker file is written last, so an interrupted init
  // leaves nothing that Open() accepts.
  static Status Init(Env& env, const std::string& path);
  // REQUIRES: env outlives the datastore.
  static Result<std::unique_ptr<Datastore>> Open(Env& env, const std::string& path);

  // The client's encryption key (null: none). With a key, new snapshots are
  // encrypted and signed with it, and the manifests of snapshots made with
  // it are checked on every read. Set once, right after Open.
  void SetKey(std::shared_ptr<const crypto::CryptConfig> key) { key_ = std::move(key); }
  const crypto::CryptConfig* key() const { return key_.get(); }
  // What decodes the chunks and blobs of a snapshot with this manifest:
  // null for a plain snapshot, the key for an encrypted one.
  // FailedPrecondition, naming the snapshot and the key fingerprints, when
  // it is encrypted and the datastore has no key or another one.
  Result<const crypto::CryptConfig*> CryptFor(const index::Manifest& manifest) const;

  Env& env() const { return env_; }
  const std::string& path() const { return path_; }
  store::LocalChunkStore& chunks() const { return *chunks_; }
  // Where restore, verify, ls and cat read chunks: the local chunk store,
  // or, for a client of a server, the server (remote/remote_repo.h; the
  // local store is then an empty cache of metadata).
  store::ChunkSource& source() const { return remote_ ? remote_->Source() : *chunks_; }
  // Where a backup stores chunks: the local chunk store, or the server's
  // backup session (only while its SnapshotWriter is alive).
  store::ChunkSink& sink() const { return remote_ ? remote_->Sink() : *chunks_; }
  bool is_remote() const { return remote_ != nullptr; }
  RemoteBackend* remote() const { return remote_.get(); }
  // Set once, right after Open.
  void SetRemote(std::shared_ptr<RemoteBackend> remote) { remote_ = std::move(remote); }
  // True when the chunks are objects in an object store that this client
  // maintains itself (gc, status, quarantine: RemoteBackend::OwnsChunks).
  bool chunks_in_object_store() const { return remote_ && remote_->OwnsChunks(); }
  // Reads the list of snapshots again from where it lives, for long-running
  // readers (`cairn mount`): a server's snapshot list into the metadata
  // mirror, an object store's metadata into its cache. Nothing to do for a
  // directory (its listing is the truth). Set once, right after Open; the
  // refresher must allow readers to run meanwhile.
  void SetRefresher(std::function<Status()> refresher) { refresher_ = std::move(refresher); }
  Status Refresh() const { return refresher_ ? refresher_() : Status::Ok(); }
  bool refreshable() const { return static_cast<bool>(refresher_); }

  // What users know this datastore as: its path, or its object-store URL.
  std::string DisplayName() const { return chunks_in_object_store() ? remote_->Describe() : path_; }

  // Moves a damaged chunk aside (<id>.bad) where its chunks live: the local
  // store or the object store. FailedPrecondition through a server (its own
  // verify quarantines there).
  Result<std::string> QuarantineChunk(const store::ChunkId& id) const;

  std::string GroupDir(const GroupRef& g) const { return JoinPath(path_, g.RelDir()); }
  std::string SnapshotDir(const SnapshotRef& s) const { return JoinPath(path_, s.RelDir()); }

  // Groups in namespace `ns` (not descending into child namespaces).
  Result<std::vector<GroupRef>> ListGroups(const std::string& ns) const;
  // Child namespaces of `ns`, as full paths ("a/b").
  Result<std::vector<std::string>> ListNamespaces(const std::string& ns) const;
  // Finished snapshots (manifest present) of `group`, oldest first.
  Result<std::vector<SnapshotRef>> ListSnapshots(const GroupRef& group) const;
  // Every finished snapshot in every namespace.
  Result<std::vector<SnapshotRef>> ListAllSnapshots() const;

  // Resolves "TYPE/ID/TIME" or "TYPE/ID/latest" to a finished snapshot.
  Result<SnapshotRef> Resolve(const SnapshotSpec& spec) const;

  // With a key, an encrypted manifest made with that key has its signature
  // checked (DataLoss when it does not match).
  Result<index::Manifest> ReadManifest(const SnapshotRef& snap) const;
  // Reads an image archive's index and checks it against the manifest entry
  // (size, chunk size, checksum). DataLoss names snapshot and archive.
  Result<index::FixedIndex> ReadImageIndex(const SnapshotRef& snap,
                                           const index::ArchiveEntry& entry) const;
  // The same checks, streaming the digests to `fn` instead of holding them
  // (index::ScanFixedIndex); on an error, drop what `fn` was given.
  Status ScanImageIndex(const SnapshotRef& snap, const index::ArchiveEntry& entry,
                        const std::function<void(size_t, const crypto::Digest&)>& fn) const;
  struct TreeIndexes {
    index::DynamicIndex meta;
    index::DynamicIndex data;
  };
  // Reads both indexes of a tree archive and checks them against the
  // manifest entry (stream sizes and checksums). DataLoss names snapshot,
  // archive and file.
  Result<TreeIndexes> ReadTreeIndexes(const SnapshotRef& snap,
                                      const index::ArchiveEntry& entry) const;
  // Reads a blob archive's stored bytes, checking size and SHA-256 against
  // the manifest, and returns its plaintext (decrypted with `crypt`, from
  // CryptFor, when the snapshot is encrypted).
  Result<Bytes> ReadBlobArchive(const SnapshotRef& snap, const index::ArchiveEntry& entry,
                                const crypto::CryptConfig* crypt = nullptr) const;

  // nullopt when the snapshot was never verified (or its state is unreadable).
  std::optional<VerifyState> ReadVerifyState(const SnapshotRef& snap) const;
  Status WriteVerifyState(const SnapshotRef& snap, const VerifyState& state) const;

  // Exclusive lock on a group for a backup. Unavailable (with a message that
  // says so) when another backup of the group is running.
  Result<std::unique_ptr<FileLock>> LockGroup(const GroupRef& group) const;

  // Registers a running backup for garbage collection: creates
  // .writers/<start unix ns>-<pid>-<n> and holds an exclusive flock on it for
  // the writer's life. The file stays behind when the writer ends (gc removes
  // dead ones), so gc can tell which writers run, since when, and whether
  // one started while it ran (docs/ARCHITECTURE.md, "Garbage collection").
  //
  // With chunks in an object store, a writer also holds a shared lock on
  // .gc/barrier for its life, and LockChunkRemoval() takes it exclusively:
  // gc deletes objects only while no backup runs (an object store has no
  // access times to mark chunks a backup reuses). A writer that finds gc
  // deleting waits for it (up to 10 minutes).
  Result<std::unique_ptr<FileLock>> RegisterWriter() const;
  // Exclusive lock on .gc/barrier: no backup runs while it is held.
  // Unavailable while one does; waits up to `wait_ns` for them to end.
  Result<std::unique_ptr<FileLock>> LockChunkRemoval(int64_t wait_ns) const;

  // Snapshot locks are flocks on the snapshot's manifest, so a read-only
  // store needs no lock file. Shared: held by a restore for its whole run and
  // by a backup on its dedup base, so forget and prune leave the snapshot
  // alone. NotFound when the snapshot is gone (forgotten meanwhile: a lock on
  // a manifest that was unlinked after we opened it counts as gone).
  Result<std::unique_ptr<FileLock>> LockSnapshotShared(const SnapshotRef& snap) const;
  // Exclusive, for forget and prune. Unavailable, with a message saying the
  // snapshot is in use, while a shared lock is held.
  Result<std::unique_ptr<FileLock>> LockSnapshotExclusive(const SnapshotRef& snap) const;

 private:
  Datastore(Env& env, std::string path, std::unique_ptr<store::LocalChunkStore> chunks)
      : env_(env), path_(std::move(path)), chunks_(std::move(chunks)) {}

  Status ListAllIn(const std::string& ns, int depth, std::vector<SnapshotRef>* out) const;
  // DataLoss unless the index at `path` matches `entry` (size, chunk size, checksum).
  Status CheckImageIndex(const std::string& path, const SnapshotRef& snap,
                         const index::ArchiveEntry& entry, const index::FixedIndexInfo& info) const;

  Env& env_;
  std::string path_;
  std::unique_ptr<store::LocalChunkStore> chunks_;
  std::shared_ptr<const crypto::CryptConfig> key_;
  std::shared_ptr<RemoteBackend> remote_;
  std::function<Status()> refresher_;
};

inline constexpr char kDatastoreMarker[] = ".cairn-datastore";
inline constexpr char kVerifyStateFileName[] = "verify.json.blob";
// A snapshot's administration files beside its manifest (`cairn protect`,
// `cairn notes`; maintenance/prune.h reads and writes them).
inline constexpr char kProtectedFileName[] = ".protected";
inline constexpr char kNotesFileName[] = "notes.txt";
inline constexpr char kWritersDirName[] = ".writers";
inline constexpr char kGcDirName[] = ".gc";

}  // namespace cairn::datastore
