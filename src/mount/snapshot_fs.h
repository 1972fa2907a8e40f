// SnapshotFs: the read-only file system `cairn mount` shows, without FUSE
// (fuse_mount.h is the glue), so it can be tested directly:
//
//   MOUNT/vm/100/2026-11-30T05:00:00Z/disk0.img    an image: a file, random reads
//   MOUNT/vm/100/2026-11-30T05:00:00Z/root.tree/   a tree: its directories, files,
//                                                  symlinks, hardlinks, devices and
//                                                  fifos with modes, owners, times
//                                                  and xattrs as stored
//   MOUNT/vm/100/2026-11-30T05:00:00Z/vm.conf.blob a blob: a file
//   MOUNT/vm/100/latest -> 2026-11-30T05:00:00Z    the newest snapshot of the group
//   MOUNT/ns/NAME/…                                a child namespace, the same again
//
// or, given a group or a snapshot, only that part (its directory is the
// mount's root).
//
// Listings and stat come from metadata alone: the datastore's directories
// and manifests, and a tree's metadata stream (TreeView, loaded at its first
// use; at most max_tree_bytes of views stay loaded, the least recently used
// are dropped and loaded again when needed). File contents are read on
// demand through the shared ChunkCache (StreamReader, with readahead for
// sequential readers). Namespace and group listings are read again when
// older than refresh_ns, so new snapshots appear without remounting; for a
// server or an object store, its snapshot list is fetched again first (at
// most every store_refresh_ns).
//
// Inode numbers: the directories and files cairn makes up (namespaces,
// groups, snapshots, archives) are numbered from 1 (the root) as they are
// first seen; the entries of a tree are (tree number << 32) | their number
// in the stream, so they survive the view being dropped and loaded again.
//
// An open file pins its snapshot with a shared snapshot lock (as restore
// does), so prune and forget leave it alone while it is read.
//
// Errors: NotFound (ENOENT), InvalidArgument (ENOTDIR or EINVAL),
// FailedPrecondition (EACCES: an encrypted snapshot without its key),
// DataLoss (EIO: a damaged chunk; reported once by the cache).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "access/archive_open.h"
#include "access/tree_view.h"
#include "base/logging.h"
#include "base/mutex.h"
#include "base/thread_annotations.h"
#include "datastore/datastore.h"

namespace cairn::mount {

struct Attr {
  uint64_t ino = 0;
  uint32_t mode = 0;  // S_IFMT bits and permissions
  uint32_t nlink = 1;
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint64_t size = 0;
  // Bytes that hold data (st_blocks): an image's non-zero chunks, so `cp`
  // and `du` see its holes. Unset: all of `size`.
  std::optional<uint64_t> allocated;
  // st_blksize, the read size `cat` and `cp` use: an image's is 1 MiB.
  uint32_t blksize = 4096;
  uint64_t rdev = 0;
  int64_t mtime_ns = 0;
  // False for what may change (listings of namespaces and groups, `latest`):
  // the kernel should ask again soon.
  bool stable = true;
};

struct DirEntry {
  std::string name;
  Attr attr;
};

struct SnapshotFsOptions {
  access::ReaderSettings readers;  // cache, chunk source, readahead
  uint32_t uid = 0;  // owner of the directories cairn makes up
  uint32_t gid = 0;
  int64_t refresh_ns = 1'000'000'000;
  // A server's or object store's snapshot list is fetched again at most
  // this often (Datastore::Refresh), when a listing is read again.
  int64_t store_refresh_ns = 5'000'000'000;
  uint64_t max_tree_bytes = uint64_t{512} << 20;
  Logger* logger = nullptr;  // may be null
};

struct SnapshotFsStats {
  uint64_t trees_loaded = 0;  // tree views loaded (again, after being dropped)
  uint64_t tree_bytes = 0;    // memory of the views loaded now
  uint64_t open_files = 0;
};

class SnapshotFs {
 public:
  static constexpr uint64_t kRootIno = 1;

  // `scope`: "" (the namespace `ns`), a group "vm/100", or a snapshot
  // "vm/100/TIME" or "vm/100/latest" (resolved now). REQUIRES: store and
  // the reader settings' cache and source outlive the file system.
  static Result<std::unique_ptr<SnapshotFs>> Open(const datastore::Datastore& store,
                                                  const std::string& ns, const std::string& scope,
                                                  SnapshotFsOptions options);
  ~SnapshotFs();

  Result<Attr> Lookup(uint64_t parent, std::string_view name);
  Result<Attr> GetAttr(uint64_t ino);
  // The entries of a directory, without "." and "..".
  Result<std::vector<DirEntry>> ReadDir(uint64_t ino);
  Result<std::string> ReadLink(uint64_t ino);
  Result<std::vector<std::string>> ListXattr(uint64_t ino);
  Result<std::string> GetXattr(uint64_t ino, std::string_view name);  // NotFound: no such xattr

  // An open regular file.
  class File {
   public:
    virtual ~File() = default;
    // Up to out.size() bytes at `offset`; fewer at the end of the file.
    virtual Result<size_t> Read(uint64_t offset, MutableByteSpan out) = 0;
    virtual uint64_t size() const = 0;
    // lseek's SEEK_DATA (`data`) and SEEK_HOLE: the first offset at or after
    // `offset` where data (a hole) begins. An image's zero chunks are its
    // holes; other files are all data, with the hole at their end.
    // OutOfRange (ENXIO) when `offset` is at or past the end, or when no
    // data follows it.
    virtual Result<uint64_t> Seek(uint64_t offset, bool data) const;
    // True for an image: read past the kernel's page cache (FUSE direct
    // I/O), each read straight from the chunk cache into the reader's
    // buffer. Through the page cache a sequential read cost twice the
    // kernel CPU (page allocation and a second copy) of a restore's whole
    // decode; the chunk cache already keeps what is read again.
    virtual bool direct_io() const { return false; }
  };
  Result<std::unique_ptr<File>> OpenFile(uint64_t ino);

  SnapshotFsStats stats() const;

 private:
  struct VNode;
  struct Tree;
  struct LoadedTree;
  struct SnapshotPin;
  class ArchiveFile;
  class BlobFile;

  SnapshotFs(const datastore::Datastore& store, SnapshotFsOptions options);

  VNode* NodeLocked(uint64_t ino) REQUIRES(mu_);
  uint64_t AddLocked(VNode node) REQUIRES(mu_);
  uint64_t ChildLocked(uint64_t parent, const std::string& name, VNode node) REQUIRES(mu_);
  Status RefreshLocked(uint64_t ino, bool force) REQUIRES(mu_);
  Status ListSnapshotLocked(uint64_t ino) REQUIRES(mu_);
  Attr VirtualAttrLocked(uint64_t ino) REQUIRES(mu_);

  Result<std::shared_ptr<LoadedTree>> LoadTree(uint32_t tree_id);
  Result<Attr> TreeAttr(uint32_t tree_id, uint32_t entry);
  Result<Attr> TreeLookup(uint32_t tree_id, uint32_t dir, std::string_view name);
  Result<std::vector<DirEntry>> TreeReadDir(uint32_t tree_id, uint32_t dir);
  Result<std::unique_ptr<SnapshotPin>> Pin(const datastore::SnapshotRef& snap);
  void Unpin(const std::string& key);
  void ReportOnce(const std::string& key, const Status& s);

  const datastore::Datastore& store_;
  const SnapshotFsOptions options_;
  const int64_t started_ns_;

  mutable Mutex mu_;
  std::vector<std::unique_ptr<VNode>> nodes_ GUARDED_BY(mu_);  // ino - 1
  std::vector<std::unique_ptr<Tree>> trees_ GUARDED_BY(mu_);   // tree number - 1
  uint64_t tree_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t tree_clock_ GUARDED_BY(mu_) = 0;
  uint64_t trees_loaded_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, std::shared_ptr<access::StreamReader>> images_ GUARDED_BY(mu_);
  struct PinState {
    int count = 0;
    std::unique_ptr<FileLock> lock;
  };
  std::map<std::string, PinState> pins_ GUARDED_BY(mu_);  // by snapshot
  std::set<std::string> reported_ GUARDED_BY(mu_);
  uint64_t open_files_ GUARDED_BY(mu_) = 0;
  int64_t store_refreshed_ns_ GUARDED_BY(mu_) = 0;  // when Refresh() last ran
};

}  // namespace cairn::mount
