// BlockDevice: what an NBD export serves (nbd_server.h): a fixed-size array
// of bytes that can be read at any offset and, when writable, written.
// access/ implements it over an archive (read-only, or with a copy-on-write
// overlay) and over an instant restore's target.
//
// Thread safety: implementations must allow concurrent calls from the
// server's request workers.
#pragma once

#include <cstdint>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::nbd {

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
};

}  // namespace cairn::nbd
