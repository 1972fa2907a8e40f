// UniqueFd: owns a POSIX file descriptor and closes it on scope exit, the
// one holder the env, tree backup, tree restore and fs metadata code share.
// Close() reports the error of close(2) (a write-back failure can surface
// there); the destructor and Reset() ignore it, for descriptors that were
// only read or whose errors were already reported.
//
// Thread safety: one owner at a time, like the descriptor.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "base/status.h"

namespace cairn {

class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  // Gives up ownership without closing.
  int release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Closes, reporting a failure as `what: <error>`.
  Status Close(const std::string& what) {
    int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) return ErrnoToStatus(errno, what);
    return Status::Ok();
  }

 private:
  int fd_;
};

}  // namespace cairn
