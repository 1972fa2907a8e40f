// BlockDevice: what an NBD export serves (nbd_server.h): a fixed-size array
// of bytes that can be read at any offset and, when writable, written.
// access/ implements it over an archive (read-only, or with a copy-on-write
// overlay) and over an instant restore's target.
//
// Thread safety: implementations must allow concurrent calls from the
// server's request workers.
#pragma once

#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::nbd {

// A run of bytes and whether it reads as zeros without holding data (an
// all-zero chunk): NBD_CMD_BLOCK_STATUS's base:allocation.
struct Extent {
  uint64_t length = 0;
  bool zero = false;
};

class BlockDevice {
 public:
  virtual ~BlockDevice() = default;

  virtual uint64_t size() const = 0;
  virtual bool writable() const = 0;

  // Fills `out` with bytes [offset, offset + out.size()). The server checks
  // the range first. DataLoss (a damaged chunk) becomes EIO for this read.
  virtual Status Read(uint64_t offset, MutableByteSpan out) = 0;

  // REQUIRES: writable().
  virtual Status Write(uint64_t offset, ByteSpan data) {
    (void)offset;
    (void)data;
    return PermissionDeniedError("read-only export");
  }
  // Zeros over [offset, offset + length). REQUIRES: writable().
  virtual Status WriteZeroes(uint64_t offset, uint64_t length);
  // Makes every completed write durable.
  virtual Status Flush() { return Status::Ok(); }
  // Extents from `offset`, covering at least one byte and at most `length`
  // (the server checks the range). The default: all data.
  virtual Result<std::vector<Extent>> Extents(uint64_t offset, uint64_t length) {
    (void)offset;
    return std::vector<Extent>{{length, false}};
  }
};

}  // namespace cairn::nbd
