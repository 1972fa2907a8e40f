#include "access/overlay_device.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"

namespace cairn::access {
namespace {

constexpr size_t kOffVersion = 8;
constexpr size_t kOffBlockSize = 12;
constexpr size_t kOffImageSize = 16;
constexpr size_t kOffBitmap = 24;
constexpr size_t kOffData = 32;
constexpr size_t kOffCsum = 40;
constexpr size_t kOffCrc = 72;
constexpr size_t kHeaderUsed = 76;
constexpr uint64_t kMaxImageSize = uint64_t{1} << 50;
constexpr uint64_t kPageBits = uint64_t{kOverlayHeaderSize} * 8;  // blocks per bitmap page
// Writes to the blocks of one segment run one at a time (stripe locks).
constexpr uint64_t kSegmentBlocks = 16;

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

}  // namespace

OverlayHeader OverlayLayout(uint64_t image_size, const crypto::Digest& base_csum) {
  OverlayHeader h;
  h.image_size = image_size;
  h.base_csum = base_csum;
  const uint64_t blocks = (image_size + h.block_size - 1) / h.block_size;
  h.data_offset = kOverlayHeaderSize + RoundUp((blocks + 7) / 8, kOverlayHeaderSize);
  return h;
}

Bytes EncodeOverlayHeader(const OverlayHeader& h) {
  Bytes out(kOverlayHeaderSize, 0);
  std::memcpy(out.data(), format::kOverlayMagic.data(), 8);
  format::PutU16(out.data() + kOffVersion, format::kOverlayVersion);
  format::PutU32(out.data() + kOffBlockSize, h.block_size);
  format::PutU64(out.data() + kOffImageSize, h.image_size);
  format::PutU64(out.data() + kOffBitmap, h.bitmap_offset);
  format::PutU64(out.data() + kOffData, h.data_offset);
  std::memcpy(out.data() + kOffCsum, h.base_csum.data(), 32);
  format::PutU32(out.data() + kOffCrc, format::Crc32c(ByteSpan(out.data(), kOffCrc)));
  return out;
}

Result<OverlayHeader> DecodeOverlayHeader(ByteSpan b) {
  if (b.size() < kOverlayHeaderSize) {
    return DataLossError(fmt::format("overlay header: {} bytes, {} needed", b.size(), kOverlayHeaderSize));
  }
  if (std::memcmp(b.data(), format::kOverlayMagic.data(), 8) != 0) {
    return DataLossError("not a cairn overlay (wrong magic)");
  }
  const uint16_t version = format::GetU16(b.data() + kOffVersion);
  if (version != format::kOverlayVersion) {
    return DataLossError(fmt::format("overlay version {}, this cairn reads {}", version,
                                     format::kOverlayVersion));
  }
  const uint32_t crc = format::Crc32c(ByteSpan(b.data(), kOffCrc));
  if (format::GetU32(b.data() + kOffCrc) != crc) {
    return DataLossError(fmt::format("overlay header CRC mismatch (stored {:#010x}, computed {:#010x})",
                                     format::GetU32(b.data() + kOffCrc), crc));
  }
  if (format::GetU16(b.data() + 10) != 0 ||
      std::any_of(b.begin() + kHeaderUsed, b.begin() + kOverlayHeaderSize, [](uint8_t x) { return x != 0; })) {
    return DataLossError("overlay header: reserved bytes are not zero");
  }
  OverlayHeader h;
  h.block_size = format::GetU32(b.data() + kOffBlockSize);
  h.image_size = format::GetU64(b.data() + kOffImageSize);
  h.bitmap_offset = format::GetU64(b.data() + kOffBitmap);
  h.data_offset = format::GetU64(b.data() + kOffData);
  std::memcpy(h.base_csum.data(), b.data() + kOffCsum, 32);
  if (h.block_size != kOverlayBlockSize) {
    return DataLossError(fmt::format("overlay block size {}, only {} is used", h.block_size,
                                     kOverlayBlockSize));
  }
  if (h.image_size > kMaxImageSize) {
    return DataLossError(fmt::format("overlay image size {} is over 2^50", h.image_size));
  }
  const OverlayHeader want = OverlayLayout(h.image_size, h.base_csum);
  if (h.bitmap_offset != want.bitmap_offset || h.data_offset != want.data_offset) {
    return DataLossError(fmt::format("overlay layout: bitmap at {}, data at {}; expected {} and {}",
                                     h.bitmap_offset, h.data_offset, want.bitmap_offset,
                                     want.data_offset));
  }
  return h;
}

Result<std::unique_ptr<OverlayDevice>> OverlayDevice::Open(Env& env, const std::string& path,
                                                           StreamReader& base,
                                                           const crypto::Digest& base_csum) {
  const OverlayHeader want = OverlayLayout(base.size(), base_csum);
  auto info = env.Stat(path);
  if (!info.ok() && info.status().code() != StatusCode::kNotFound) return info.status();
  if (info.ok() && !info->is_regular) {
    return InvalidArgumentError(fmt::format("overlay {} is not a regular file", path));
  }
  const bool fresh = !info.ok() || info->size == 0;
  if (fresh) {
    CAIRN_ASSIGN_OR_RETURN(auto f, env.OpenWritable(path, info.ok() ? OpenMode::kExisting
                                                                    : OpenMode::kCreateNew));
    CAIRN_RETURN_IF_ERROR(f->Truncate(want.data_offset + want.image_size));  // sparse
    CAIRN_RETURN_IF_ERROR(f->WriteAt(0, EncodeOverlayHeader(want)));
    CAIRN_RETURN_IF_ERROR(f->Sync());
    CAIRN_RETURN_IF_ERROR(f->Close());
    CAIRN_RETURN_IF_ERROR(env.SyncDir(DirName(path)));
  }
  auto lock = env.TryLockExisting(path, /*exclusive=*/true);
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kUnavailable) {
      return UnavailableError(fmt::format("overlay {} is in use by another export", path));
    }
    return lock.status();
  }
  CAIRN_ASSIGN_OR_RETURN(auto in, env.OpenReadable(path));
  Bytes head(kOverlayHeaderSize);
  CAIRN_ASSIGN_OR_RETURN(size_t n, in->ReadAt(0, head));
  head.resize(n);
  auto header = DecodeOverlayHeader(head);
  if (!header.ok()) return header.status().WithContext(path);
  if (header->image_size != want.image_size || header->base_csum != want.base_csum) {
    return FailedPreconditionError(fmt::format(
        "overlay {} belongs to another image ({} bytes, index checksum {}...), not this one ({} "
        "bytes, {}...): give another file",
        path, header->image_size, crypto::DigestHex(header->base_csum).substr(0, 16),
        want.image_size, crypto::DigestHex(want.base_csum).substr(0, 16)));
  }
  CAIRN_ASSIGN_OR_RETURN(uint64_t file_size, in->Size());
  if (file_size < header->data_offset) {
    return DataLossError(fmt::format("overlay {}: {} bytes, shorter than its bitmap", path, file_size));
  }
  const uint64_t blocks = (header->image_size + kOverlayBlockSize - 1) / kOverlayBlockSize;
  std::vector<uint8_t> bitmap((blocks + 7) / 8);
  CAIRN_ASSIGN_OR_RETURN(n, in->ReadAt(header->bitmap_offset, bitmap));
  if (n != bitmap.size()) return DataLossError(fmt::format("overlay {}: short bitmap", path));
  CAIRN_ASSIGN_OR_RETURN(auto out, env.OpenWritable(path, OpenMode::kExisting));
  if (file_size < header->data_offset + header->image_size) {
    CAIRN_RETURN_IF_ERROR(out->Truncate(header->data_offset + header->image_size));
  }
  return std::unique_ptr<OverlayDevice>(new OverlayDevice(*header, base, std::move(out),
                                                          std::move(in), std::move(*lock),
                                                          std::move(bitmap)));
}

OverlayDevice::OverlayDevice(OverlayHeader header, StreamReader& base,
                             std::unique_ptr<WritableFile> out, std::unique_ptr<ReadableFile> in,
                             std::unique_ptr<FileLock> lock, std::vector<uint8_t> bitmap)
    : header_(header), base_(base), out_(std::move(out)), in_(std::move(in)),
      lock_(std::move(lock)),
      blocks_((header.image_size + kOverlayBlockSize - 1) / kOverlayBlockSize),
      bits_((blocks_ + 63) / 64) {
  for (size_t i = 0; i < bitmap.size(); ++i) {
    if (bitmap[i] != 0) bits_[i / 8].fetch_or(uint64_t{bitmap[i]} << (8 * (i % 8)));
  }
}

OverlayDevice::~OverlayDevice() { Close().IgnoreError(); }

bool OverlayDevice::Has(uint64_t block) const {
  return ((bits_[block / 64].load(std::memory_order_acquire) >> (block % 64)) & 1) != 0;
}

void OverlayDevice::Mark(uint64_t block) {
  bits_[block / 64].fetch_or(uint64_t{1} << (block % 64), std::memory_order_release);
  MutexLock lock(dirty_mu_);
  dirty_pages_.insert(block / kPageBits);
}

uint64_t OverlayDevice::blocks_written() const {
  uint64_t n = 0;
  for (const auto& w : bits_) n += static_cast<uint64_t>(__builtin_popcountll(w.load()));
  return n;
}

Status OverlayDevice::ReadBlocks(uint64_t first, uint64_t n, uint8_t* out) {
  // Runs of blocks from the same place, each read in one call.
  const uint64_t end_block = first + n;
  for (uint64_t b = first; b < end_block;) {
    const bool mine = Has(b);
    uint64_t e = b + 1;
    while (e < end_block && Has(e) == mine) ++e;
    const uint64_t from = b * kOverlayBlockSize;
    const uint64_t to = std::min(e * kOverlayBlockSize, header_.image_size);
    MutableByteSpan span(out + (from - first * kOverlayBlockSize), to - from);
    if (mine) {
      CAIRN_ASSIGN_OR_RETURN(size_t got, in_->ReadAt(header_.data_offset + from, span));
      if (got != span.size()) return DataLossError(fmt::format("overlay {}: short read", in_->path()));
    } else {
      CAIRN_RETURN_IF_ERROR(base_.Read(from, span));
    }
    b = e;
  }
  return Status::Ok();
}

Status OverlayDevice::Read(uint64_t offset, MutableByteSpan out) {
  const uint64_t end = offset + out.size();
  // Whole blocks go straight into `out`; a block read in part through a
  // bounce buffer.
  for (uint64_t pos = offset; pos < end;) {
    const uint64_t b = pos / kOverlayBlockSize;
    const uint64_t bstart = b * kOverlayBlockSize;
    const uint64_t bend = std::min(bstart + kOverlayBlockSize, header_.image_size);
    if (pos != bstart || end < bend) {
      uint8_t block[kOverlayBlockSize];
      CAIRN_RETURN_IF_ERROR(ReadBlocks(b, 1, block));
      const uint64_t to = std::min(end, bend);
      std::memcpy(out.data() + (pos - offset), block + (pos - bstart), to - pos);
      pos = to;
      continue;
    }
    // The image's short last block counts as whole when read to its end.
    const uint64_t whole = end == header_.image_size ? blocks_ - b : (end - pos) / kOverlayBlockSize;
    CAIRN_RETURN_IF_ERROR(ReadBlocks(b, whole, out.data() + (pos - offset)));
    pos = std::min(end, (b + whole) * kOverlayBlockSize);
  }
  return Status::Ok();
}

Status OverlayDevice::Write(uint64_t offset, ByteSpan data) {
  const uint64_t end = offset + data.size();
  uint64_t pos = offset;
  while (pos < end) {
    // One segment at a time, under its stripe's lock.
    const uint64_t block = pos / kOverlayBlockSize;
    const uint64_t seg_end =
        std::min(end, (block / kSegmentBlocks + 1) * kSegmentBlocks * kOverlayBlockSize);
    const uint64_t first = block, last = (seg_end - 1) / kOverlayBlockSize;
    const uint64_t span_start = first * kOverlayBlockSize;
    const uint64_t span_end = std::min((last + 1) * kOverlayBlockSize, header_.image_size);
    MutexLock lock(stripes_[(first / kSegmentBlocks) % kStripes]);
    Bytes buf(span_end - span_start);
    // A block written only in part keeps the rest of its bytes.
    if (pos > span_start) CAIRN_RETURN_IF_ERROR(ReadBlocks(first, 1, buf.data()));
    if (seg_end < span_end && (last > first || pos == span_start)) {
      CAIRN_RETURN_IF_ERROR(ReadBlocks(last, 1, buf.data() + (last - first) * kOverlayBlockSize));
    }
    std::memcpy(buf.data() + (pos - span_start), data.data() + (pos - offset), seg_end - pos);
    CAIRN_RETURN_IF_ERROR(out_->WriteAt(header_.data_offset + span_start, buf));
    for (uint64_t b = first; b <= last; ++b) Mark(b);
    pos = seg_end;
  }
  return Status::Ok();
}

Result<std::vector<nbd::Extent>> OverlayDevice::Extents(uint64_t offset, uint64_t length) {
  const ChunkMap& map = base_.map();
  return ChunkExtents(map, offset, length, [&](size_t c) {
    if (!map.IsZero(c)) return false;
    const uint64_t first = map.Start(c) / kOverlayBlockSize;
    const uint64_t last = (map.End(c) - 1) / kOverlayBlockSize;
    for (uint64_t b = first; b <= last; ++b) {
      if (Has(b)) return false;
    }
    return true;
  });
}

Status OverlayDevice::Flush() {
  MutexLock flush(flush_mu_);
  if (closed_) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(out_->Sync());  // data first: no bit may name unwritten data
  std::set<uint64_t> pages;
  {
    MutexLock lock(dirty_mu_);
    pages.swap(dirty_pages_);
  }
  if (pages.empty()) return Status::Ok();
  const uint64_t bitmap_bytes = (blocks_ + 7) / 8;
  for (uint64_t page : pages) {
    const uint64_t from = page * kOverlayHeaderSize;
    const uint64_t to = std::min(bitmap_bytes, from + kOverlayHeaderSize);
    Bytes bytes(to - from);
    for (uint64_t i = from; i < to; ++i) {
      bytes[i - from] = static_cast<uint8_t>(bits_[i / 8].load(std::memory_order_acquire) >> (8 * (i % 8)));
    }
    CAIRN_RETURN_IF_ERROR(out_->WriteAt(header_.bitmap_offset + from, bytes));
  }
  return out_->Sync();
}

Status OverlayDevice::Close() {
  Status s = Flush();
  MutexLock flush(flush_mu_);
  if (closed_) return s;
  closed_ = true;
  Status c = out_->Close();
  return s.ok() ? c : s;
}

}  // namespace cairn::access
