#include "gendata/gen_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cairn::bench {

Result<std::unique_ptr<GenFile>> GenFile::Create(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoToStatus(errno, fmt::format("create {}", path));
  return std::unique_ptr<GenFile>(new GenFile(fd, path));
}

GenFile::~GenFile() { Close().IgnoreError(); }

Status GenFile::WriteAt(uint64_t offset, std::span<const uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, fmt::format("write {} at {}", path_, offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status GenFile::ReadAt(uint64_t offset, std::span<uint8_t> data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pread(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, fmt::format("read {} at {}", path_, offset + done));
    }
    if (n == 0) {
      return OutOfRangeError(
          fmt::format("read {} at {}: unexpected end of file", path_, offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status GenFile::Truncate(uint64_t size) {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoToStatus(errno, fmt::format("truncate {} to {}", path_, size));
  }
  return Status::Ok();
}

Status GenFile::Close() {
  if (fd_ < 0) return Status::Ok();
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return ErrnoToStatus(errno, fmt::format("close {}", path_));
  return Status::Ok();
}

Status SetTimes(const std::string& path, int64_t unix_seconds) {
  struct timespec times[2];
  times[0].tv_sec = static_cast<time_t>(unix_seconds);
  times[0].tv_nsec = 0;
  times[1] = times[0];
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return ErrnoToStatus(errno, fmt::format("set times of {}", path));
  }
  return Status::Ok();
}

}  // namespace cairn::bench
