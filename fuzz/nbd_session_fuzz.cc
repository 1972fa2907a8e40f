// Fuzz target for what an NBD client sends `cairn nbd` (nbd/nbd_session.h):
// the handshake's options and the transmission's requests, from a hostile
// client. The input is the client's byte stream; byte 0 picks a read-only
// or writable device. The session runs on the fuzzing thread (no workers)
// against a 64 KiB device in memory, with a 64 KiB request limit so that
// every answer is bounded.
//
// Invariants: no crash, leak or sanitizer finding; what the server writes
// stays within a bound proportional to what it was sent (no amplification
// beyond one maximal read per request header).
#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "nbd/nbd_protocol.h"
#include "nbd/nbd_session.h"

namespace {

using namespace cairn;

class Memory final : public nbd::BlockDevice {
 public:
  explicit Memory(bool writable) : data_(64u << 10, 0x5a), writable_(writable) {}
  uint64_t size() const override { return data_.size(); }
  bool writable() const override { return writable_; }
  Status Read(uint64_t offset, MutableByteSpan out) override {
    if (out.empty()) return Status::Ok();
    std::memcpy(out.data(), data_.data() + offset, out.size());
    return Status::Ok();
  }
  Status Write(uint64_t offset, ByteSpan in) override {
    if (in.empty()) return Status::Ok();
    std::memcpy(data_.data() + offset, in.data(), in.size());
    return Status::Ok();
  }

 private:
  Bytes data_;
  bool writable_;
};

class Input final : public nbd::Channel {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  Status ReadExact(MutableByteSpan out) override {
    if (out.size() > size_ - pos_) return OutOfRangeError("end of input");
    if (out.empty()) return Status::Ok();
    std::memcpy(out.data(), data_ + pos_, out.size());
    pos_ += out.size();
    return Status::Ok();
  }
  Status WriteAll(ByteSpan data) override {
    written_ += data.size();
    return Status::Ok();
  }
  uint64_t written() const { return written_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t written_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Memory device((data[0] & 1) != 0);
  Input in(data + 1, size - 1);
  nbd::ExportInfo info;
  info.name = "disk0.img";
  info.description = "fuzz";
  info.max_request = 64u << 10;
  nbd::Negotiated negotiated;
  auto go = nbd::Handshake(in, device, info, &negotiated);
  if (go.ok() && *go) {
    nbd::SessionOptions options;
    options.workers = 0;
    nbd::Transmission(in, device, info, negotiated, options, nullptr).IgnoreError();
  }
  // Each 16-byte option or 28-byte request earns at most one maximal answer.
  const uint64_t bound = 4096 + (size / 16 + 1) * (info.max_request + 4096);
  if (in.written() > bound) {
    __builtin_fprintf(stderr, "nbd_session_fuzz: wrote %llu bytes for %zu\n",
                     static_cast<unsigned long long>(in.written()), size);
    std::abort();
  }
  return 0;
}
