// Test helpers of the nbd module: a BlockDevice in memory (read-only or
// writable, with an injected read error range) and a socket Channel.
//
// Thread safety: MemoryDevice allows concurrent calls.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "nbd/block_device.h"
#include "nbd/nbd_session.h"

namespace cairn::nbd {

class MemoryDevice final : public BlockDevice {
 public:
  MemoryDevice(Bytes data, bool writable) : data_(std::move(data)), writable_(writable) {}
  uint64_t size() const override { return data_.size(); }
  bool writable() const override { return writable_; }
  Status Read(uint64_t offset, MutableByteSpan out) override {
    std::lock_guard lock(mu_);
    if (offset < bad_end_ && offset + out.size() > bad_begin_) return DataLossError("injected damage");
    std::memcpy(out.data(), data_.data() + offset, out.size());
    return Status::Ok();
  }
  Status Write(uint64_t offset, ByteSpan in) override {
    std::lock_guard lock(mu_);
    std::memcpy(data_.data() + offset, in.data(), in.size());
    return Status::Ok();
  }
  Status Flush() override {
    std::lock_guard lock(mu_);
    ++flushes_;
    return Status::Ok();
  }
  // Reads overlapping [begin, end) fail with DataLoss.
  void Damage(uint64_t begin, uint64_t end) {
    std::lock_guard lock(mu_);
    bad_begin_ = begin;
    bad_end_ = end;
  }
  Bytes data() const {
    std::lock_guard lock(mu_);
    return data_;
  }
  int flushes() const {
    std::lock_guard lock(mu_);
    return flushes_;
  }

 private:
  mutable std::mutex mu_;
  Bytes data_;
  bool writable_;
  uint64_t bad_begin_ = 0, bad_end_ = 0;
  int flushes_ = 0;
};

// One end of a socketpair.
class SocketChannel final : public Channel {
 public:
  explicit SocketChannel(int fd) : fd_(fd) {}
  ~SocketChannel() override { ::close(fd_); }
  Status ReadExact(MutableByteSpan out) override {
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (n == 0) return OutOfRangeError("closed");
      if (n < 0) return ErrnoToStatus(errno, "recv");
      got += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  Status WriteAll(ByteSpan data) override {
    size_t put = 0;
    while (put < data.size()) {
      ssize_t n = ::send(fd_, data.data() + put, data.size() - put, MSG_NOSIGNAL);
      if (n < 0) return ErrnoToStatus(errno, "send");
      put += static_cast<size_t>(n);
    }
    return Status::Ok();
  }
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_;
};

}  // namespace cairn::nbd
