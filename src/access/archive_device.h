// ArchiveDevice: an image archive as a read-only NBD device (`cairn nbd`
// without --writable): every read through its StreamReader.
//
// Thread safety: as StreamReader (concurrent reads).
#pragma once

#include "access/stream_reader.h"
#include "nbd/block_device.h"

namespace cairn::access {

class ArchiveDevice final : public nbd::BlockDevice {
 public:
  // REQUIRES: reader outlives the device.
  explicit ArchiveDevice(StreamReader& reader) : reader_(reader) {}
  uint64_t size() const override { return reader_.size(); }
  bool writable() const override { return false; }
  Status Read(uint64_t offset, MutableByteSpan out) override { return reader_.Read(offset, out); }
  // Zero chunks read as zeros without data: nbdcopy and qemu-img skip them.
  Result<std::vector<nbd::Extent>> Extents(uint64_t offset, uint64_t length) override {
    const ChunkMap& map = reader_.map();
    return ChunkExtents(map, offset, length, [&](size_t c) { return map.IsZero(c); });
  }

 private:
  StreamReader& reader_;
};

}  // namespace cairn::access
