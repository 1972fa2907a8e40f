// OverlayDevice: a writable view of an archive for `cairn nbd --writable
// --overlay FILE`. Writes land in the overlay file, never in the store;
// reads take each 4 KiB block from the overlay when it was written, else
// from the archive (StreamReader). docs/FORMAT.md, "Overlay", has the file.
//
//   header   4096 bytes: magic, version, block size, image size, the
//            image's index checksum (an overlay fits one image only)
//   bitmap   one bit per block: written blocks
//   data     block b at data_offset + b * block_size (a sparse file)
//
// A write of a whole block goes straight to the data area; a partial one
// reads the block (from the overlay or the archive), merges and writes the
// whole block. A block's bit is set in memory after its data is written.
// Flush (NBD_CMD_FLUSH, and closing) makes the data durable first, then
// writes the changed bitmap pages and syncs again, so a bit on disk never
// names a block whose data did not reach it: a crash loses at most the
// writes since the last flush, as a disk's cache would.
//
// The file is locked (flock) while open: two exports cannot share it.
//
// Thread safety: Read, Write and Flush may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "access/stream_reader.h"
#include "base/env.h"
#include "base/mutex.h"
#include "nbd/block_device.h"

namespace cairn::access {

inline constexpr uint32_t kOverlayBlockSize = 4096;
inline constexpr size_t kOverlayHeaderSize = 4096;

struct OverlayHeader {
  uint32_t block_size = kOverlayBlockSize;
  uint64_t image_size = 0;
  uint64_t bitmap_offset = kOverlayHeaderSize;
  uint64_t data_offset = 0;
  crypto::Digest base_csum{};  // the image's index checksum (its manifest `csum`)
};

// The layout for an image of `image_size` bytes.
OverlayHeader OverlayLayout(uint64_t image_size, const crypto::Digest& base_csum);
Bytes EncodeOverlayHeader(const OverlayHeader& h);
// DataLoss on a bad magic, version, CRC, reserved bytes or inconsistent
// layout; hostile input is fine (fuzz/overlay_header_fuzz.cc).
Result<OverlayHeader> DecodeOverlayHeader(ByteSpan bytes);

class OverlayDevice final : public nbd::BlockDevice {
 public:
  // Opens `path`, creating it when absent or empty. FailedPrecondition
  // when it belongs to another image (size or index checksum), Unavailable
  // when another export holds it. REQUIRES: env and base outlive the device.
  static Result<std::unique_ptr<OverlayDevice>> Open(Env& env, const std::string& path,
                                                     StreamReader& base,
                                                     const crypto::Digest& base_csum);
  ~OverlayDevice() override;  // flushes (errors are logged by Close's callers)

  uint64_t size() const override { return header_.image_size; }
  bool writable() const override { return true; }
  Status Read(uint64_t offset, MutableByteSpan out) override;
  Status Write(uint64_t offset, ByteSpan data) override;
  Status Flush() override;
  // Zero chunks of the archive with no block written over them.
  Result<std::vector<nbd::Extent>> Extents(uint64_t offset, uint64_t length) override;
  // Flushes and closes the file.
  Status Close();

  uint64_t blocks_written() const;  // blocks the overlay holds

 private:
  static constexpr size_t kStripes = 64;

  OverlayDevice(OverlayHeader header, StreamReader& base, std::unique_ptr<WritableFile> out,
                std::unique_ptr<ReadableFile> in, std::unique_ptr<FileLock> lock,
                std::vector<uint8_t> bitmap);
  bool Has(uint64_t block) const;
  void Mark(uint64_t block);
  // Reads blocks [first, first + n) of the image into `out` as they are now.
  Status ReadBlocks(uint64_t first, uint64_t n, uint8_t* out);
  Status WriteBlock(uint64_t block, uint32_t from, ByteSpan data);

  const OverlayHeader header_;
  StreamReader& base_;
  std::unique_ptr<WritableFile> out_;
  std::unique_ptr<ReadableFile> in_;
  std::unique_ptr<FileLock> lock_;
  const uint64_t blocks_;
  std::vector<std::atomic<uint64_t>> bits_;  // one bit per block
  std::array<Mutex, kStripes> stripes_;  // writes to one block, one at a time
  Mutex flush_mu_;
  std::set<uint64_t> dirty_pages_ GUARDED_BY(dirty_mu_);  // bitmap pages to write
  Mutex dirty_mu_;
  bool closed_ GUARDED_BY(flush_mu_) = false;
};

}  // namespace cairn::access
