// The real Env: POSIX calls, errno mapped to Status with the path named.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/unique_fd.h"

namespace cairn {
namespace {

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
  if (info->is_block_device) {
    uint64_t bytes = 0;
    if (::ioctl(fd, BLKGETSIZE64, &bytes) != 0) {
      return ErrnoToStatus(errno, fmt::format("size of block device {}", path));
    }
    info->size = bytes;
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
