// PowerLossEnv: an EnvWrapper for tests that simulates a power cut.
//
// It keeps a model of one directory tree (`root`, on the target Env): every
// file's contents and every directory's entries, each twice — as the
// running system sees them (volatile) and as the disk is guaranteed to hold
// them (durable). Only the calls that Linux ext4 and xfs (data=ordered)
// document as making something durable move state from volatile to durable:
//
//   WritableFile::Sync (fsync)   that file's contents (and access time)
//   SyncDir (fsync on a dir)     that directory's entries: the creates,
//                                renames, unlinks, mkdirs and rmdirs in it
//   SyncFilesystem (syncfs)      everything under root
//
// Nothing else is durable: not a file's contents after close or rename, not
// a rename or create in a directory never fsynced since, not the entry of a
// directory whose parent was not fsynced. At the cut point (CutBeforeOp,
// CutBeforeSync, CutNow) every later call fails with Aborted, so the run
// under test stops as a process would; Remount() then rewrites root on the
// target as the disk would show it after a reboot:
//
//   kSyncedOnly  every unsynced namespace change is lost (the journal never
//                committed them): the harshest state for metadata.
//   kAllMetadata every namespace change up to the cut survives (the journal
//                committed just before the cut, as another process's fsync
//                or the 5 s commit may do), but file contents are still only
//                what was fsynced: the "renamed, but zero length" state of a
//                write-then-rename without fsync.
//
// File contents are what was fsynced, or with Data::kTornTail a torn tail:
// some of the pages written since (see there).
//
// Between these two extremes lie partial journal commits; cutting at every
// operation with kAllMetadata covers each prefix of the namespace changes.
// Access times are durable with the contents. Paths outside root pass through unrecorded (sources,
// restore targets) but fail after the cut too.
//
// Thread safety: safe for concurrent use; one mutex serializes the calls
// under root with the model.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/env.h"
#include "base/mutex.h"

namespace cairn {

class PowerLossEnv final : public EnvWrapper {
 public:
  enum class Metadata { kSyncedOnly, kAllMetadata };
  // What a file written since its last fsync holds: that fsync's contents
  // (kSyncedOnly), or, when it only grew since (a new file, an append), the
  // synced contents plus some of the new pages, as writeback may have
  // reached them: a prefix of the new contents, cut at a 4 KiB page
  // boundary chosen by the seed (kTornTail).
  enum class Data { kSyncedOnly, kTornTail };

  // Models the tree under `root` (an existing directory on `target`); what
  // is there now counts as durable. Call Start() before use; Start() again
  // forgets the model and starts afresh (counters at zero, no cut armed).
  PowerLossEnv(Env* target, std::string root);
  ~PowerLossEnv() override;
  Status Start();

  // The power fails just before the n-th counted operation (1-based, counted
  // from Start or the last Remount): that call and every later one fail.
  // Counted: opening a file for writing, WriteAt, Append, Truncate, Sync,
  // CreateDir, Rename(NoReplace), RemoveFile, RemoveDir, SyncDir,
  // SyncFilesystem and TryLock under root. 0 disarms.
  void CutBeforeOp(uint64_t n);
  // The same, counting only the sync calls (Sync, SyncDir, SyncFilesystem).
  void CutBeforeSync(uint64_t n);
  // Cuts now.
  void CutNow();
  bool is_cut() const;
  uint64_t ops() const;        // counted operations so far
  uint64_t sync_ops() const;   // of those, syncs

  // Replaces root on the target with what a reboot would show (see above),
  // then models that as the new durable state, counters at zero, not cut.
  Status Remount(Metadata metadata, Data data = Data::kSyncedOnly, uint64_t seed = 0);

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     OpenMode mode) override;
  Result<FileInfo> Stat(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  Result<std::vector<std::string>> ListDir(const std::string& path) override;
  // Directory handles are for tree sources and restore targets, outside
  // root: they pass through (refused after the cut, and under root, which
  // the model does not track through them: FailedPrecondition).
  Result<std::unique_ptr<Dir>> OpenDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RenameNoReplace(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Status SyncFilesystem(const std::string& path) override;
  Result<std::unique_ptr<FileLock>> TryLock(const std::string& path, bool exclusive) override;
  Result<std::unique_ptr<FileLock>> TryLockExisting(const std::string& path,
                                                    bool exclusive) override;
  Status SetAccessTime(const std::string& path, int64_t unix_nanos) override;

  // Internal, for the wrapped files.
  struct Inode;
  Status FileWrite(uint64_t ino, const std::string& path, uint64_t offset, ByteSpan data,
                   bool via_append, bool at_end, WritableFile& base, uint64_t* end);
  Status FileTruncate(uint64_t ino, const std::string& path, uint64_t size, WritableFile& base);
  Status FileSync(uint64_t ino, const std::string& path, WritableFile& base);
  Status CheckAlive(const std::string& path) const;

 private:
  enum class OpKind { kPlain, kSync };
  // Counts one operation; Aborted when it is (or comes after) the cut.
  Status Tick(OpKind kind, const std::string& what) REQUIRES(mu_);
  // The parent directory's inode and the last name of `path`, when `path`
  // is root or under it (no parent for root itself).
  bool Split(const std::string& path, std::vector<std::string>* parts) const;
  std::optional<uint64_t> Lookup(const std::vector<std::string>& parts) const REQUIRES(mu_);
  std::optional<uint64_t> ParentOf(const std::string& path, std::string* name) const
      REQUIRES(mu_);
  uint64_t NewInode(bool is_dir) REQUIRES(mu_);
  void MarkDirty(uint64_t ino) REQUIRES(mu_) { dirty_.insert(ino); }
  void SyncInode(uint64_t ino) REQUIRES(mu_);
  Status Scan(const std::string& path, uint64_t ino) REQUIRES(mu_);
  Status Wipe(const std::string& dir) REQUIRES(mu_);
  struct RebuildOptions {
    Metadata metadata;
    Data data;
    uint64_t seed;
  };
  Status Rebuild(const std::string& path, uint64_t ino, const RebuildOptions& options,
                 std::unordered_set<uint64_t>* seen) REQUIRES(mu_);
  Status RenameImpl(const std::string& from, const std::string& to, bool no_replace);

  std::string root_;
  mutable Mutex mu_;
  std::unordered_map<uint64_t, std::unique_ptr<Inode>> inodes_ GUARDED_BY(mu_);
  std::unordered_set<uint64_t> dirty_ GUARDED_BY(mu_);
  uint64_t root_ino_ GUARDED_BY(mu_) = 0;
  uint64_t next_ino_ GUARDED_BY(mu_) = 1;
  uint64_t ops_ GUARDED_BY(mu_) = 0;
  uint64_t sync_ops_ GUARDED_BY(mu_) = 0;
  uint64_t cut_before_op_ GUARDED_BY(mu_) = 0;
  uint64_t cut_before_sync_ GUARDED_BY(mu_) = 0;
  bool cut_ GUARDED_BY(mu_) = false;
};

}  // namespace cairn
