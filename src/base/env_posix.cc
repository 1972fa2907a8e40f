// The real Env: POSIX calls, errno mapped to Status with the path named.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/unique_fd.h"

namespace cairn {
namespace {

// The entries of an open directory stream but "." and "..", then closes
// it; `path` names it in errors.
Result<std::vector<std::string>> ReadNamesAndClose(DIR* dir, const std::string& path) {
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    std::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return ErrnoToStatus(err, fmt::format("list {}", path));
  return names;
}

Status FdStat(int fd, const std::string& path, FileInfo* info) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoToStatus(errno, fmt::format("stat {}", path));
  info->size = static_cast<uint64_t>(st.st_size);
  info->is_dir = S_ISDIR(st.st_mode);
  info->is_regular = S_ISREG(st.st_mode);
  info->is_block_device = S_ISBLK(st.st_mode);
  info->inode = st.st_ino;
  info->mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  info->atime_ns = int64_t{st.st_atim.tv_sec} * 1000000000 + st.st_atim.tv_nsec;
  info->ctime_ns = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
  if (info->is_block_device) {
    uint64_t bytes = 0;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) {
      return ErrnoToStatus(errno, fmt::format("size of block device {}", path));
    }
    info->size = bytes;
  }
  return Status::Ok();
}

// An xattr call's error: the refusals of IsRefusedXattr (no support, too
// large: Unimplemented; EPERM/EACCES: PermissionDenied) or the errno's own.
Status XattrError(int err, const std::string& what) {
  if (err == ENOTSUP || err == ENOSYS || err == E2BIG) {
    return UnimplementedError(fmt::format("{}: {}", what, std::strerror(err)));
  }
  return ErrnoToStatus(err, what);
}

struct timespec TimeSpec(int64_t unix_nanos) {
  struct timespec t;
  t.tv_sec = static_cast<time_t>(unix_nanos / 1'000'000'000);
  t.tv_nsec = static_cast<long>(unix_nanos % 1'000'000'000);
  if (t.tv_nsec < 0) {  // before 1970: floor division
    t.tv_nsec += 1'000'000'000;
    --t.tv_sec;
  }
  return t;
}

// Owner, mode, mtime and xattrs through a descriptor (files and Dir "").
Status FdSetOwner(int fd, const std::string& path, uint32_t uid, uint32_t gid) {
  if (::fchown(fd, uid, gid) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: chown {}:{}", path, uid, gid));
  }
  return Status::Ok();
}
Status FdSetMode(int fd, const std::string& path, uint32_t mode) {
  if (::fchmod(fd, mode & 07777) != 0) {
    return ErrnoToStatus(errno, fmt::format("{}: chmod {:o}", path, mode & 07777));
  }
  return Status::Ok();
}
Status FdSetModTime(int fd, const std::string& path, int64_t unix_nanos) {
  struct timespec times[2] = {{0, UTIME_OMIT}, TimeSpec(unix_nanos)};
  if (::futimens(fd, times) != 0) return ErrnoToStatus(errno, fmt::format("{}: set mtime", path));
  return Status::Ok();
}
Status FdSetXattr(int fd, const std::string& path, const std::string& key, std::string_view v) {
  if (::fsetxattr(fd, key.c_str(), v.data(), v.size(), 0) != 0) {
    return XattrError(errno, fmt::format("{}: set xattr {}", path, key));
  }
  return Status::Ok();
}

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixReadableFile() override { ::close(fd_); }

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) override {
    size_t done = 0;
    while (done < buf.size()) {
      ssize_t n =
          ::pread(fd_, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, fmt::format("read {} at offset {}", path_, offset + done));
      }
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    return done;
  }

  Result<uint64_t> Size() override {
    FileInfo info;
    CAIRN_RETURN_IF_ERROR(FdStat(fd_, path_, &info));
    return info.size;
  }

  Result<FileInfo> Stat() override {
    FileInfo info;
    CAIRN_RETURN_IF_ERROR(FdStat(fd_, path_, &info));
    return info;
  }

  const std::string& path() const override { return path_; }

 private:
  std::string path_;
  int fd_;
};

class PosixWritableFile final : public WritableFile {
 public:
  // `append_mode`: fd was opened O_APPEND (OpenMode::kAppend).
  PosixWritableFile(std::string path, int fd, bool owns_fd, bool append_mode = false)
      : path_(std::move(path)), fd_(fd), owns_fd_(owns_fd), append_mode_(append_mode) {}
  ~PosixWritableFile() override { Close().IgnoreError(); }

  Status WriteAt(uint64_t offset, ByteSpan data) override {
    if (append_mode_) {
      return InvalidArgumentError(
          fmt::format("write {} at offset {}: the file is open for appending only", path_, offset));
    }
    if (direct_fd_ >= 0 && offset % kDirectAlign == 0 && data.size() % kDirectAlign == 0 &&
        !data.empty()) {
      return DirectWriteAt(offset, data);
    }
    return WriteAll(fd_, offset, data);
  }

  bool EnableDirectWrites() override {
    if (direct_fd_ >= 0) return true;
    if (fd_ < 0 || !owns_fd_ || append_mode_) return false;
    // A second descriptor on the same file; the first keeps serving
    // unaligned writes, Truncate and Sync.
    int fd = ::open(fmt::format("/proc/self/fd/{}", fd_).c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (fd < 0) return false;  // EINVAL: the file system has no O_DIRECT (tmpfs)
    direct_fd_ = fd;
    return true;
  }

  Status Append(ByteSpan data) override {
    if (append_mode_) return AppendOnce(data);
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, fmt::format("write {}", path_));
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return ErrnoToStatus(errno, fmt::format("truncate {} to {} bytes", path_, size));
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoToStatus(errno, fmt::format("fsync {}", path_));
    return Status::Ok();
  }

  Status Close() override {
    if (direct_fd_ >= 0) {
      ::close(direct_fd_);
      direct_fd_ = -1;
    }
    if (fd_ < 0) return Status::Ok();
    int fd = fd_;
    fd_ = -1;
    if (owns_fd_ && ::close(fd) != 0) return ErrnoToStatus(errno, fmt::format("close {}", path_));
    return Status::Ok();
  }

  Result<FileInfo> Stat() override {
    FileInfo info;
    CAIRN_RETURN_IF_ERROR(FdStat(fd_, path_, &info));
    return info;
  }

  Status SetOwner(uint32_t uid, uint32_t gid) override { return FdSetOwner(fd_, path_, uid, gid); }
  Status SetMode(uint32_t mode) override { return FdSetMode(fd_, path_, mode); }
  Status SetModTime(int64_t ns) override { return FdSetModTime(fd_, path_, ns); }
  Status SetXattr(const std::string& key, std::string_view value) override {
    return FdSetXattr(fd_, path_, key, value);
  }

  const std::string& path() const override { return path_; }

 private:
  static constexpr size_t kDirectAlign = 4096;

  // O_APPEND: one write(2), so the bytes land contiguously at the end of the
  // file whoever else appends. A short write is an error, not continued: a
  // second write could land after another writer's bytes.
  Status AppendOnce(ByteSpan data) {
    if (data.empty()) return Status::Ok();
    ssize_t n;
    do {
      n = ::write(fd_, data.data(), data.size());
    } while (n < 0 && errno == EINTR);
    if (n < 0) return ErrnoToStatus(errno, fmt::format("append to {}", path_));
    if (static_cast<size_t>(n) != data.size()) {
      return ResourceExhaustedError(fmt::format(
          "append to {}: short write, {} of {} bytes (file system full?); the partial bytes "
          "stay at the end of the file",
          path_, n, data.size()));
    }
    return Status::Ok();
  }

  // O_DIRECT wants the memory aligned too: unaligned data goes through this
  // thread's bounce buffer (a copy costs far less than the page cache's).
  Status DirectWriteAt(uint64_t offset, ByteSpan data) {
    if (reinterpret_cast<uintptr_t>(data.data()) % kDirectAlign == 0) {
      return WriteDirectOrBuffered(offset, data);
    }
    struct Free {
      void operator()(uint8_t* p) const { std::free(p); }
    };
    thread_local std::unique_ptr<uint8_t, Free> bounce;
    thread_local size_t bounce_size = 0;
    if (bounce_size < data.size()) {
      bounce.reset(static_cast<uint8_t*>(std::aligned_alloc(kDirectAlign, data.size())));
      bounce_size = bounce ? data.size() : 0;
      if (!bounce) return WriteAll(fd_, offset, data);
    }
    std::memcpy(bounce.get(), data.data(), data.size());
    return WriteDirectOrBuffered(offset, ByteSpan(bounce.get(), data.size()));
  }

  // A file system that opened O_DIRECT but refuses this write (EINVAL: a
  // logical block larger than 4096) gets it buffered instead.
  Status WriteDirectOrBuffered(uint64_t offset, ByteSpan data) {
    ssize_t n;
    do {
      n = ::pwrite(direct_fd_, data.data(), data.size(), static_cast<off_t>(offset));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EINVAL) return WriteAll(fd_, offset, data);
    if (n < 0) {
      return ErrnoToStatus(errno, fmt::format("write {} at offset {}", path_, offset));
    }
    size_t done = static_cast<size_t>(n);
    return WriteAll(fd_, offset + done, data.subspan(done));  // rare short write: the rest buffered
  }

  Status WriteAll(int fd, uint64_t offset, ByteSpan data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n =
          ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, fmt::format("write {} at offset {}", path_, offset + done));
      }
      done += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  std::string path_;
  int fd_;
  bool owns_fd_;
  bool append_mode_;
  int direct_fd_ = -1;  // O_DIRECT twin of fd_, once EnableDirectWrites succeeded
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // closing drops the flock

 private:
  int fd_;
};

// Runs `call(buffer, size)` (a list or get xattr call) with a buffer that
// grows until the result fits. nullopt with errno set on failure.
template <typename Call>
std::optional<std::string> ReadGrowing(Call call) {
  std::string buf;
  for (int attempt = 0; attempt < 8; ++attempt) {
    ssize_t need = call(nullptr, 0);
    if (need < 0) return std::nullopt;
    buf.resize(static_cast<size_t>(need) + 1);
    ssize_t got = call(buf.data(), buf.size());
    if (got >= 0) {
      buf.resize(static_cast<size_t>(got));
      return buf;
    }
    if (errno != ERANGE) return std::nullopt;  // ERANGE: it grew meanwhile
  }
  errno = ERANGE;
  return std::nullopt;
}

bool NoXattrSupport(int err) { return err == ENOTSUP || err == ENOSYS; }

class PosixDir final : public Dir {
 public:
  PosixDir(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}

  const std::string& path() const override { return path_; }
  int fd() const { return fd_.get(); }

  Result<std::vector<std::string>> List() override {
    // A descriptor of its own: readdir's position must not be shared.
    int fd = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* dir = fd < 0 ? nullptr : ::fdopendir(fd);
    if (dir == nullptr) {
      int err = errno;
      if (fd >= 0) ::close(fd);
      return ErrnoToStatus(err, fmt::format("list {}", path_));
    }
    return ReadNamesAndClose(dir, path_);
  }

  Result<struct stat> Lstat(const std::string& name) override {
    struct stat st;
    int rc = name.empty() ? ::fstat(fd_.get(), &st)
                          : ::fstatat(fd_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW);
    if (rc != 0) return ErrnoToStatus(errno, fmt::format("lstat {}", Join(name)));
    return st;
  }

  Result<std::unique_ptr<Dir>> OpenDir(const std::string& name) override {
    int fd = ::openat(fd_.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("open directory {}", Join(name)));
    return std::unique_ptr<Dir>(std::make_unique<PosixDir>(Join(name), fd));
  }

  Result<std::unique_ptr<ReadableFile>> OpenFile(const std::string& name) override {
    constexpr int kFlags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::openat(fd_.get(), name.c_str(), kFlags | O_NOATIME);
    if (fd < 0 && errno == EPERM) fd = ::openat(fd_.get(), name.c_str(), kFlags);  // not ours
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("open {}", Join(name)));
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
    return std::unique_ptr<ReadableFile>(std::make_unique<PosixReadableFile>(Join(name), fd));
  }

  Result<std::unique_ptr<WritableFile>> CreateFile(const std::string& name,
                                                   uint32_t mode) override {
    int fd = ::openat(fd_.get(), name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      mode & 07777);
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("create {}", Join(name)));
    return std::unique_ptr<WritableFile>(
        std::make_unique<PosixWritableFile>(Join(name), fd, /*owns_fd=*/true));
  }

  Status CreateDir(const std::string& name, uint32_t mode) override {
    if (::mkdirat(fd_.get(), name.c_str(), mode & 07777) != 0) {
      return ErrnoToStatus(errno, fmt::format("create directory {}", Join(name)));
    }
    return Status::Ok();
  }

  Status CreateSymlink(const std::string& name, const std::string& target) override {
    if (::symlinkat(target.c_str(), fd_.get(), name.c_str()) != 0) {
      return ErrnoToStatus(errno, fmt::format("symlink {}", Join(name)));
    }
    return Status::Ok();
  }

  Status CreateNode(const std::string& name, uint32_t mode, uint64_t rdev) override {
    if (::mknodat(fd_.get(), name.c_str(), mode, static_cast<dev_t>(rdev)) != 0) {
      return ErrnoToStatus(errno, fmt::format("{} {}", S_ISFIFO(mode) ? "mkfifo" : "mknod",
                                              Join(name)));
    }
    return Status::Ok();
  }

  Status CreateHardlink(const std::string& name, Dir& from, const std::string& from_name) override {
    auto* source = dynamic_cast<PosixDir*>(&from);
    if (source == nullptr) {
      return InvalidArgumentError(
          fmt::format("link {}: {} is not a directory of this Env", Join(name), from.path()));
    }
    // Flags 0: a symlink at the old name would be linked itself, never followed.
    if (::linkat(source->fd(), from_name.c_str(), fd_.get(), name.c_str(), 0) != 0) {
      return ErrnoToStatus(errno,
                           fmt::format("link {} to {}", Join(name), source->Join(from_name)));
    }
    return Status::Ok();
  }

  Result<std::string> ReadLink(const std::string& name, size_t size_hint) override {
    std::string buf(std::max<size_t>(size_hint, 255) + 1, '\0');
    while (true) {
      ssize_t n = ::readlinkat(fd_.get(), name.c_str(), buf.data(), buf.size());
      if (n < 0) return ErrnoToStatus(errno, fmt::format("readlink {}", Join(name)));
      if (static_cast<size_t>(n) < buf.size()) {
        buf.resize(static_cast<size_t>(n));
        return buf;
      }
      if (buf.size() > kMaxReadLink) {
        return InvalidArgumentError(fmt::format("readlink {}: target longer than {} bytes",
                                                Join(name), kMaxReadLink));
      }
      buf.resize(buf.size() * 2);
    }
  }

  Result<std::vector<Xattr>> ReadXattrs(const std::string& name, uint32_t type) override {
    UniqueFd fd(OpenForXattrs(name, type));
    const std::string proc = ProcPath(name);
    auto list = ReadGrowing([&](char* buf, size_t size) {
      return fd.get() >= 0 ? ::flistxattr(fd.get(), buf, size)
                           : ::llistxattr(proc.c_str(), buf, size);
    });
    if (!list) {
      if (NoXattrSupport(errno)) return std::vector<Xattr>();
      return ErrnoToStatus(errno, fmt::format("list xattrs of {}", Join(name)));
    }
    std::vector<Xattr> out;
    for (size_t pos = 0; pos < list->size();) {
      size_t end = list->find('\0', pos);
      if (end == std::string::npos) end = list->size();
      std::string key = list->substr(pos, end - pos);
      pos = end + 1;
      if (key.empty()) continue;
      auto value = ReadGrowing([&](char* buf, size_t size) {
        return fd.get() >= 0 ? ::fgetxattr(fd.get(), key.c_str(), buf, size)
                             : ::lgetxattr(proc.c_str(), key.c_str(), buf, size);
      });
      if (!value) {
        if (errno == ENODATA) continue;  // removed since it was listed
        if (NoXattrSupport(errno)) return std::vector<Xattr>();
        return ErrnoToStatus(errno, fmt::format("read xattr {} of {}", key, Join(name)));
      }
      out.push_back(Xattr{std::move(key), std::move(*value)});
    }
    return out;
  }

  Status SetOwner(const std::string& name, uint32_t uid, uint32_t gid) override {
    if (name.empty()) return FdSetOwner(fd_.get(), path_, uid, gid);
    if (::fchownat(fd_.get(), name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: chown {}:{}", Join(name), uid, gid));
    }
    return Status::Ok();
  }

  Status SetMode(const std::string& name, uint32_t mode) override {
    if (name.empty()) return FdSetMode(fd_.get(), path_, mode);
    // Linux has no fchmodat that refuses a symlink at `name`; callers only
    // set the mode of what they created and know is not one.
    if (::fchmodat(fd_.get(), name.c_str(), mode & 07777, 0) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: chmod {:o}", Join(name), mode & 07777));
    }
    return Status::Ok();
  }

  Status SetModTime(const std::string& name, int64_t unix_nanos) override {
    if (name.empty()) return FdSetModTime(fd_.get(), path_, unix_nanos);
    struct timespec times[2] = {{0, UTIME_OMIT}, TimeSpec(unix_nanos)};
    if (::utimensat(fd_.get(), name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoToStatus(errno, fmt::format("{}: set mtime", Join(name)));
    }
    return Status::Ok();
  }

  Status SetXattr(const std::string& name, const std::string& key,
                  std::string_view value) override {
    if (name.empty()) return FdSetXattr(fd_.get(), path_, key, value);
    if (::lsetxattr(ProcPath(name).c_str(), key.c_str(), value.data(), value.size(), 0) != 0) {
      return XattrError(errno, fmt::format("{}: set xattr {}", Join(name), key));
    }
    return Status::Ok();
  }

 private:
  static constexpr size_t kMaxReadLink = size_t{1} << 16;

  std::string Join(const std::string& name) const {
    if (name.empty()) return path_;
    return path_ == "." ? name : JoinPath(path_, name);
  }

  // A path naming `name` in this directory for the l*xattr calls: the
  // kernel resolves /proc/self/fd/N to the directory itself, and the
  // l-variants do not follow a final symlink.
  std::string ProcPath(const std::string& name) const {
    return name.empty() ? fmt::format("/proc/self/fd/{}", fd_.get())
                        : fmt::format("/proc/self/fd/{}/{}", fd_.get(), name);
  }

  // Regular files and directories are opened (never a device: opening one
  // can have side effects) so the xattr calls work on the fd; -1 when that
  // fails (e.g. an unreadable file as non-root), and the caller falls back
  // to the path.
  int OpenForXattrs(const std::string& name, uint32_t type) const {
    if (type != S_IFREG && type != S_IFDIR) return -1;
    if (name.empty()) return ::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0);
    return ::openat(fd_.get(), name.c_str(),
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  }

  std::string path_;
  UniqueFd fd_;
};

class PosixEnv final : public Env {
 public:
  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("open {}", path));
    return std::unique_ptr<ReadableFile>(std::make_unique<PosixReadableFile>(path, fd));
  }

  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     OpenMode mode) override {
    int flags = O_WRONLY | O_CLOEXEC;
    switch (mode) {
      case OpenMode::kCreateNew:
        flags |= O_CREAT | O_EXCL;
        break;
      case OpenMode::kTruncate:
        flags |= O_CREAT | O_TRUNC;
        break;
      case OpenMode::kExisting:
        break;
      case OpenMode::kAppend:
        flags |= O_CREAT | O_APPEND;
        break;
    }
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("open {} for writing", path));
    return std::unique_ptr<WritableFile>(std::make_unique<PosixWritableFile>(
        path, fd, /*owns_fd=*/true, /*append_mode=*/mode == OpenMode::kAppend));
  }

  Result<std::unique_ptr<WritableFile>> OpenStdout() override {
    return std::unique_ptr<WritableFile>(
        std::make_unique<PosixWritableFile>("<stdout>", STDOUT_FILENO, false));
  }

  Result<FileInfo> Stat(const std::string& path) override {
    // Open O_PATH is not enough for BLKGETSIZE64; stat first, open devices.
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, fmt::format("stat {}", path));
    FileInfo info;
    info.size = static_cast<uint64_t>(st.st_size);
    info.is_dir = S_ISDIR(st.st_mode);
    info.is_regular = S_ISREG(st.st_mode);
    info.is_block_device = S_ISBLK(st.st_mode);
    info.inode = st.st_ino;
    info.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    info.atime_ns = int64_t{st.st_atim.tv_sec} * 1000000000 + st.st_atim.tv_nsec;
    info.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec;
    if (info.is_block_device) {
      UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("open {}", path));
      CAIRN_RETURN_IF_ERROR(FdStat(fd.get(), path, &info));
    }
    return info;
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0)
      return ErrnoToStatus(errno, fmt::format("mkdir {}", path));
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    DIR* dir = ::opendir(path.c_str());
    if (dir == nullptr) return ErrnoToStatus(errno, fmt::format("list {}", path));
    return ReadNamesAndClose(dir, path);
  }

  Result<std::unique_ptr<Dir>> OpenDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, fmt::format("open directory {}", path));
    return std::unique_ptr<Dir>(std::make_unique<PosixDir>(path, fd));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoToStatus(errno, fmt::format("rename {} to {}", from, to));
    }
    return Status::Ok();
  }

  Status RenameNoReplace(const std::string& from, const std::string& to) override {
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno != EINVAL && errno != ENOSYS) {
        if (errno == EEXIST) return AlreadyExistsError(fmt::format("{} already exists", to));
        return ErrnoToStatus(errno, fmt::format("rename {} to {}", from, to));
      }
      // A file system without RENAME_NOREPLACE: link(2) refuses to replace too.
      if (::link(from.c_str(), to.c_str()) != 0) {
        if (errno == EEXIST) return AlreadyExistsError(fmt::format("{} already exists", to));
        return ErrnoToStatus(errno, fmt::format("link {} to {}", from, to));
      }
      ::unlink(from.c_str());
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoToStatus(errno, fmt::format("remove {}", path));
    return Status::Ok();
  }

  Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) return ErrnoToStatus(errno, fmt::format("rmdir {}", path));
    return Status::Ok();
  }

  Status SyncDir(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("open directory {}", path));
    if (::fsync(fd.get()) != 0)
      return ErrnoToStatus(errno, fmt::format("fsync directory {}", path));
    return Status::Ok();
  }

  Status SyncFilesystem(const std::string& path) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("open {}", path));
    if (::syncfs(fd.get()) != 0) return ErrnoToStatus(errno, fmt::format("syncfs {}", path));
    return Status::Ok();
  }

  Result<std::unique_ptr<FileLock>> TryLock(const std::string& path, bool exclusive) override {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("open lock file {}", path));
    if (::flock(fd.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return UnavailableError(fmt::format("{} is locked by another process", path));
      }
      return ErrnoToStatus(errno, fmt::format("lock {}", path));
    }
    return std::unique_ptr<FileLock>(std::make_unique<PosixFileLock>(fd.release()));
  }

  Result<std::unique_ptr<FileLock>> TryLockExisting(const std::string& path,
                                                    bool exclusive) override {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoToStatus(errno, fmt::format("open {}", path));
    if (::flock(fd.get(), (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) {
        return UnavailableError(fmt::format("{} is locked by another process", path));
      }
      return ErrnoToStatus(errno, fmt::format("lock {}", path));
    }
    return std::unique_ptr<FileLock>(std::make_unique<PosixFileLock>(fd.release()));
  }

  Status SetAccessTime(const std::string& path, int64_t unix_nanos) override {
    struct timespec times[2];
    times[0].tv_sec = unix_nanos / 1000000000;
    times[0].tv_nsec = unix_nanos % 1000000000;
    times[1].tv_sec = 0;
    times[1].tv_nsec = UTIME_OMIT;
    if (::utimensat(AT_FDCWD, path.c_str(), times, 0) != 0) {
      return ErrnoToStatus(errno, fmt::format("set access time of {}", path));
    }
    return Status::Ok();
  }

  int64_t NowUnixSeconds() override {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  int64_t NowUnixNanos() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  int64_t NowMonotonicNanos() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

std::unique_ptr<Env> NewPosixEnv() { return std::make_unique<PosixEnv>(); }

}  // namespace cairn
