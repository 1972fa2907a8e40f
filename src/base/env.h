// Env: every file-system and clock call cairn makes goes through this
// interface, so tests can inject faults (ENOSPC, EIO, short reads, slow
// storage) and simulate crashes without touching the code under test.
//
// PosixEnv (NewPosixEnv) is the real one; EnvWrapper forwards everything to
// a target Env so a decorator overrides only what it changes.
//
// Thread safety: Env implementations are safe for concurrent use. A
// ReadableFile may be read from several threads at once (positional reads);
// a WritableFile's WriteAt may be called concurrently for disjoint ranges.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"

namespace cairn {

struct FileInfo {
  uint64_t size = 0;  // bytes; for a block device, the device size
  bool is_dir = false;
  bool is_regular = false;
  bool is_block_device = false;
  uint64_t inode = 0;
  int64_t mtime_ns = 0;
  int64_t atime_ns = 0;  // garbage collection's "last used" time for chunks
  int64_t ctime_ns = 0;  // inode change time (tree backup's change detection)
};

// One extended attribute (POSIX ACLs are the system.posix_acl_* ones).
struct Xattr {
  std::string name;   // "user.comment", "system.posix_acl_access", ...
  std::string value;  // raw bytes
  bool operator==(const Xattr&) const = default;
};

class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to buf.size() bytes at `offset`. Returns the count read, which
  // is smaller than buf.size() only at end of file. Retries EINTR.
  virtual Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) = 0;
  // Current size (file length or block-device size).
  virtual Result<uint64_t> Size() = 0;
  // fstat of the open file: size, times, inode (Unimplemented where the
  // file has no such thing).
  virtual Result<FileInfo> Stat() { return UnimplementedError("stat of " + path()); }
  virtual const std::string& path() const = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;  // closes, ignoring errors; call Close()
  // Writes all of `data` at `offset` (retrying short writes and EINTR).
  virtual Status WriteAt(uint64_t offset, ByteSpan data) = 0;
  // Writes all of `data` at the current end of what Append wrote so far
  // (the only mode a pipe or terminal supports); with OpenMode::kAppend, at
  // the end of the file, in one write(2) (see there).
  virtual Status Append(ByteSpan data) = 0;
  virtual Status Truncate(uint64_t size) = 0;
  // Hint for writers of large images: from now on, WriteAt of whole
  // page-aligned ranges (offset and length multiples of 4096) may bypass the
  // page cache (O_DIRECT), which costs far less CPU than copying into it and
  // leaves the cache to the rest of the machine. Other writes stay buffered;
  // Sync() covers both. False when the file or file system cannot (tmpfs,
  // pipes, wrappers): nothing changes then.
  virtual bool EnableDirectWrites() { return false; }
  virtual Status Sync() = 0;
  virtual Status Close() = 0;  // idempotent
  virtual Result<FileInfo> Stat() = 0;
  // Owner, mode (permission bits), modification time and xattrs of the open
  // file, set through its descriptor (tree restore). Unimplemented where
  // the file has none (stdout, object-store uploads). SetXattr: a refusal
  // by the file system (no xattr support, EPERM/EACCES, too large) is
  // Unimplemented or PermissionDenied; see IsRefusedXattr.
  virtual Status SetOwner(uint32_t uid, uint32_t gid);
  virtual Status SetMode(uint32_t mode);
  virtual Status SetModTime(int64_t unix_nanos);
  virtual Status SetXattr(const std::string& name, std::string_view value);
  virtual const std::string& path() const = 0;
};

// True for a SetXattr error that means "this file system or user may not
// have that xattr" (a warning for restores), not a failing disk.
bool IsRefusedXattr(const Status& s);

// An open directory, for work on the entries in it (tree backup walks and
// tree restore creates through these). Every `name` is one path component;
// no call follows a symlink at `name` (the *at() calls with O_NOFOLLOW /
// AT_SYMLINK_NOFOLLOW), so nothing outside the directory is reached. An
// empty `name` means the directory itself (through its descriptor). Costs
// the same system calls as the raw *at() calls. Errors name the path.
//
// Thread safety: calls on one Dir may come from several threads.
class Dir {
 public:
  virtual ~Dir() = default;
  virtual const std::string& path() const = 0;

  // Entry names without "." and "..", unsorted.
  virtual Result<std::vector<std::string>> List() = 0;
  // lstat(2) of `name`: a symlink is described, not followed. NotFound when
  // absent.
  virtual Result<struct stat> Lstat(const std::string& name) = 0;
  // The directory `name` (a symlink there is refused: NotFound/ELOOP).
  virtual Result<std::unique_ptr<Dir>> OpenDir(const std::string& name) = 0;
  // The regular file `name`, for reading whole: without updating its access
  // time where the caller may, and with the kernel asked to read it ahead.
  virtual Result<std::unique_ptr<ReadableFile>> OpenFile(const std::string& name) = 0;
  // A new regular file `name` with permission bits `mode` (AlreadyExists
  // when something is there).
  virtual Result<std::unique_ptr<WritableFile>> CreateFile(const std::string& name,
                                                           uint32_t mode) = 0;
  virtual Status CreateDir(const std::string& name, uint32_t mode) = 0;
  virtual Status CreateSymlink(const std::string& name, const std::string& target) = 0;
  // A fifo or device node: `mode` holds the type (S_IFIFO, S_IFCHR, S_IFBLK)
  // and permission bits. Device nodes need privilege (PermissionDenied).
  virtual Status CreateNode(const std::string& name, uint32_t mode, uint64_t rdev) = 0;
  // A hard link `name` to `from_name` in `from` (a Dir of the same Env).
  virtual Status CreateHardlink(const std::string& name, Dir& from,
                                const std::string& from_name) = 0;
  // The target of symlink `name`; `size_hint` (lstat's st_size) sizes the
  // first attempt.
  virtual Result<std::string> ReadLink(const std::string& name, size_t size_hint) = 0;
  // The xattrs of `name` (of file type `type`, S_IFMT bits of its mode), in
  // the order listed; empty when the file system has none.
  virtual Result<std::vector<Xattr>> ReadXattrs(const std::string& name, uint32_t type) = 0;
  // As WritableFile's setters, on `name` (never following a symlink; a
  // symlink takes owner, times and xattrs only).
  virtual Status SetOwner(const std::string& name, uint32_t uid, uint32_t gid) = 0;
  virtual Status SetMode(const std::string& name, uint32_t mode) = 0;
  virtual Status SetModTime(const std::string& name, int64_t unix_nanos) = 0;
  virtual Status SetXattr(const std::string& name, const std::string& key,
                          std::string_view value) = 0;
};

// Forwards every call to `target`, which it owns; the Dirs and files it
// opens are the target's, unwrapped (override OpenDir etc. to wrap them).
class DirWrapper : public Dir {
 public:
  explicit DirWrapper(std::unique_ptr<Dir> target) : target_(std::move(target)) {}
  Dir* target() const { return target_.get(); }

  const std::string& path() const override { return target_->path(); }
  Result<std::vector<std::string>> List() override { return target_->List(); }
  Result<struct stat> Lstat(const std::string& n) override { return target_->Lstat(n); }
  Result<std::unique_ptr<Dir>> OpenDir(const std::string& n) override {
    return target_->OpenDir(n);
  }
  Result<std::unique_ptr<ReadableFile>> OpenFile(const std::string& n) override {
    return target_->OpenFile(n);
  }
  Result<std::unique_ptr<WritableFile>> CreateFile(const std::string& n, uint32_t m) override {
    return target_->CreateFile(n, m);
  }
  Status CreateDir(const std::string& n, uint32_t m) override { return target_->CreateDir(n, m); }
  Status CreateSymlink(const std::string& n, const std::string& t) override {
    return target_->CreateSymlink(n, t);
  }
  Status CreateNode(const std::string& n, uint32_t m, uint64_t rdev) override {
    return target_->CreateNode(n, m, rdev);
  }
  // `from` is unwrapped one level when it is a DirWrapper too.
  Status CreateHardlink(const std::string& n, Dir& from, const std::string& from_name) override;
  Result<std::string> ReadLink(const std::string& n, size_t hint) override {
    return target_->ReadLink(n, hint);
  }
  Result<std::vector<Xattr>> ReadXattrs(const std::string& n, uint32_t type) override {
    return target_->ReadXattrs(n, type);
  }
  Status SetOwner(const std::string& n, uint32_t u, uint32_t g) override {
    return target_->SetOwner(n, u, g);
  }
  Status SetMode(const std::string& n, uint32_t m) override { return target_->SetMode(n, m); }
  Status SetModTime(const std::string& n, int64_t ns) override {
    return target_->SetModTime(n, ns);
  }
  Status SetXattr(const std::string& n, const std::string& k, std::string_view v) override {
    return target_->SetXattr(n, k, v);
  }

 private:
  std::unique_ptr<Dir> target_;
};

// Held advisory lock (flock); released when destroyed or when the process
// dies, so a killed process never leaves a lock that blocks forever.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

enum class OpenMode {
  kCreateNew,  // must not exist (O_EXCL)
  kTruncate,   // create or truncate to zero
  kExisting,   // must exist; contents kept (files and block devices)
  // Created if absent, contents kept (O_CREAT | O_APPEND): every Append()
  // lands at the end of the file as it is at that moment, even with other
  // writers (other descriptors, other processes), so appends never overwrite
  // one another. Each Append() is one write(2), whole or an error: a short
  // write (disk full) is not continued, because another writer's bytes may
  // already follow it; the partial bytes stay at the end of the file.
  // WriteAt() is refused (InvalidArgument: Linux would append anyway) and
  // EnableDirectWrites() is false.
  kAppend,
};

class Env {
 public:
  virtual ~Env() = default;

  virtual Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) = 0;
  virtual Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                             OpenMode mode) = 0;
  // Standard output as a WritableFile (Append only). Not closed on Close().
  virtual Result<std::unique_ptr<WritableFile>> OpenStdout() = 0;

  // NotFound when absent. Follows symlinks.
  virtual Result<FileInfo> Stat(const std::string& path) = 0;
  // AlreadyExists when present.
  virtual Status CreateDir(const std::string& path) = 0;
  // Entry names without "." and "..", unsorted.
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // The directory at `path` (a symlink there is followed), for work on its
  // entries (Dir).
  virtual Result<std::unique_ptr<Dir>> OpenDir(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // As Rename, but AlreadyExists instead of replacing an existing `to`.
  virtual Status RenameNoReplace(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  virtual Status RemoveDir(const std::string& path) = 0;  // must be empty
  // fsync on the directory, making renames and creations in it durable.
  virtual Status SyncDir(const std::string& path) = 0;
  // syncfs(2) on the file system holding `path`.
  virtual Status SyncFilesystem(const std::string& path) = 0;
  // Non-blocking flock on `path` (created if absent). Unavailable when
  // another process holds a conflicting lock.
  virtual Result<std::unique_ptr<FileLock>> TryLock(const std::string& path, bool exclusive) = 0;
  // The same on an existing file, opened read-only and never created
  // (NotFound when absent): a lock on a file that others may remove.
  virtual Result<std::unique_ptr<FileLock>> TryLockExisting(const std::string& path,
                                                            bool exclusive) = 0;
  // Sets the access time of `path` to `unix_nanos`, leaving the modification
  // time alone (utimensat; works on noatime/relatime mounts). NotFound when
  // absent. Garbage collection reads it back as FileInfo::atime_ns.
  virtual Status SetAccessTime(const std::string& path, int64_t unix_nanos) = 0;

  virtual int64_t NowUnixSeconds() = 0;
  // Wall clock in nanoseconds (CLOCK_REALTIME), comparable with atime_ns.
  virtual int64_t NowUnixNanos() = 0;
  virtual int64_t NowMonotonicNanos() = 0;
};

std::unique_ptr<Env> NewPosixEnv();

// Forwards every call to `target`, which must outlive the wrapper.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& p) override {
    return target_->OpenReadable(p);
  }
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& p, OpenMode m) override {
    return target_->OpenWritable(p, m);
  }
  Result<std::unique_ptr<WritableFile>> OpenStdout() override { return target_->OpenStdout(); }
  Result<FileInfo> Stat(const std::string& p) override { return target_->Stat(p); }
  Status CreateDir(const std::string& p) override { return target_->CreateDir(p); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override {
    return target_->ListDir(p);
  }
  Result<std::unique_ptr<Dir>> OpenDir(const std::string& p) override {
    return target_->OpenDir(p);
  }
  Status Rename(const std::string& f, const std::string& t) override {
    return target_->Rename(f, t);
  }
  Status RenameNoReplace(const std::string& f, const std::string& t) override {
    return target_->RenameNoReplace(f, t);
  }
  Status RemoveFile(const std::string& p) override { return target_->RemoveFile(p); }
  Status RemoveDir(const std::string& p) override { return target_->RemoveDir(p); }
  Status SyncDir(const std::string& p) override { return target_->SyncDir(p); }
  Status SyncFilesystem(const std::string& p) override { return target_->SyncFilesystem(p); }
  Result<std::unique_ptr<FileLock>> TryLock(const std::string& p, bool exclusive) override {
    return target_->TryLock(p, exclusive);
  }
  Result<std::unique_ptr<FileLock>> TryLockExisting(const std::string& p, bool exclusive) override {
    return target_->TryLockExisting(p, exclusive);
  }
  Status SetAccessTime(const std::string& p, int64_t unix_nanos) override {
    return target_->SetAccessTime(p, unix_nanos);
  }
  int64_t NowUnixSeconds() override { return target_->NowUnixSeconds(); }
  int64_t NowUnixNanos() override { return target_->NowUnixNanos(); }
  int64_t NowMonotonicNanos() override { return target_->NowMonotonicNanos(); }

 private:
  Env* target_;
};

// --- Helpers built on the interface -------------------------------------

// Reads a whole file; InvalidArgument when it is larger than `max_size`.
Result<Bytes> ReadWholeFile(Env& env, const std::string& path, uint64_t max_size);
// The same into `out`, reusing its capacity (and never zero-filling it).
Status ReadWholeFileInto(Env& env, const std::string& path, uint64_t max_size, ReadBuffer* out);

// Durable replace: writes `path`.tmp, fsyncs it, renames it over `path`,
// fsyncs the directory. A crash leaves either the old or the new content.
Status WriteFileAtomic(Env& env, const std::string& path, ByteSpan data);

// Replaces `path` through a temporary name unique to this process and call,
// without fsync: for caches, where concurrent writers of the same content
// must never show a torn file but a crash may lose the file.
Status WriteFileReplacing(Env& env, const std::string& path, ByteSpan data);

// Creates `path` and its missing parents; OK when it already exists.
Status CreateDirs(Env& env, const std::string& path);

// Joins two path parts with exactly one '/'.
std::string JoinPath(std::string_view a, std::string_view b);
// Directory part of `path` ("." when it has none).
std::string DirName(std::string_view path);

}  // namespace cairn
