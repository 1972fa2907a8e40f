#include "index/fixed_index.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"

namespace cairn::index {
namespace {

// Header byte offsets (docs/FORMAT.md, "Fixed index").
constexpr size_t kOffVersion = 8;
constexpr size_t kOffReserved = 10;  // 2 bytes, zero
constexpr size_t kOffChunkSize = 12;
constexpr size_t kOffImageSize = 16;
constexpr size_t kOffChunkCount = 24;
constexpr size_t kOffCsum = 32;
constexpr size_t kOffHeaderCrc = 64;  // CRC32C of bytes [0, 64); zero up to 4096

crypto::Digest DigestsCsum(const std::vector<crypto::Digest>& digests) {
  crypto::Sha256Hasher h;
  for (const auto& d : digests) h.Update(d);
  return h.Finish();
}

}  // namespace

FixedIndex::FixedIndex(uint64_t image_size, uint32_t chunk_size,
                       std::vector<crypto::Digest> digests)
    : image_size_(image_size), chunk_size_(chunk_size), digests_(std::move(digests)) {
  csum_ = DigestsCsum(digests_);
}

Status FixedIndex::ValidateChunkSize(uint32_t chunk_size) {
  if (!std::has_single_bit(chunk_size) || chunk_size < kMinChunkSize ||
      chunk_size > kMaxChunkSize) {
    return InvalidArgumentError(fmt::format(
        "chunk size {} must be a power of two between {} and {}", chunk_size, kMinChunkSize,
        kMaxChunkSize));
  }
  return Status::Ok();
}

uint32_t FixedIndex::ChunkLength(size_t i) const {
  uint64_t end = std::min<uint64_t>(ChunkOffset(i) + chunk_size_, image_size_);
  return static_cast<uint32_t>(end - ChunkOffset(i));
}

Bytes FixedIndex::Encode() const {
  Bytes out(kFixedIndexHeaderSize + digests_.size() * 32, 0);
  uint8_t* h = out.data();
  std::memcpy(h, format::kFixedIndexMagic.data(), 8);
  format::PutU16(h + kOffVersion, format::kFixedIndexVersion);
  format::PutU32(h + kOffChunkSize, chunk_size_);
  format::PutU64(h + kOffImageSize, image_size_);
  format::PutU64(h + kOffChunkCount, digests_.size());
  std::memcpy(h + kOffCsum, csum_.data(), 32);
  format::PutU32(h + kOffHeaderCrc, format::Crc32c(ByteSpan(h, kOffHeaderCrc)));
  uint8_t* p = h + kFixedIndexHeaderSize;
  for (const auto& d : digests_) {
    std::memcpy(p, d.data(), 32);
    p += 32;
  }
  return out;
}

namespace {

// Checks the 4096-byte header `h` of an index file of `file_size` bytes: its
// CRC, version, zero reserved bytes, and that the sizes agree. The digests'
// checksum is the caller's to compare.
Result<FixedIndexInfo> DecodeHeader(const uint8_t* h, uint64_t file_size) {
  if (file_size < kFixedIndexHeaderSize) {
    return DataLossError(fmt::format("fixed index truncated: {} bytes, header needs {}",
                                     file_size, kFixedIndexHeaderSize));
  }
  if (std::memcmp(h, format::kFixedIndexMagic.data(), 8) != 0) {
    return DataLossError("not a cairn fixed index (bad magic)");
  }
  uint32_t header_crc = format::GetU32(h + kOffHeaderCrc);
  uint32_t computed = format::Crc32c(ByteSpan(h, kOffHeaderCrc));
  if (header_crc != computed) {
    return DataLossError(fmt::format("fixed index header CRC mismatch (stored 0x{:08x}, "
                                     "computed 0x{:08x})",
                                     header_crc, computed));
  }
  uint16_t version = format::GetU16(h + kOffVersion);
  if (version != format::kFixedIndexVersion) {
    return DataLossError(fmt::format("unsupported fixed index version {}", version));
  }
  // Reserved header bytes must be zero (docs/FORMAT.md): keeps the encoding
  // canonical and leaves them free for later versions.
  if (format::GetU16(h + kOffReserved) != 0 ||
      !std::all_of(h + kOffHeaderCrc + 4, h + kFixedIndexHeaderSize,
                   [](uint8_t b) { return b == 0; })) {
    return DataLossError("fixed index: reserved header bytes not zero");
  }
  FixedIndexInfo info;
  info.chunk_size = format::GetU32(h + kOffChunkSize);
  info.image_size = format::GetU64(h + kOffImageSize);
  info.chunk_count = format::GetU64(h + kOffChunkCount);
  std::memcpy(info.csum.data(), h + kOffCsum, 32);
  if (Status s = FixedIndex::ValidateChunkSize(info.chunk_size); !s.ok()) {
    return DataLossError(fmt::format("fixed index: {}", s.message()));
  }
  if (info.image_size > kMaxImageSize) {
    return DataLossError(
        fmt::format("fixed index: image size {} exceeds the limit", info.image_size));
  }
  const uint64_t count = FixedIndex::ChunkCount(info.image_size, info.chunk_size);
  if (info.chunk_count != count) {
    return DataLossError(fmt::format("fixed index: {} chunks listed, {} bytes need {}",
                                     info.chunk_count, info.image_size, count));
  }
  if ((file_size - kFixedIndexHeaderSize) != count * 32) {
    return DataLossError(fmt::format("fixed index: {} bytes of digests, expected {} (truncated?)",
                                     file_size - kFixedIndexHeaderSize, count * 32));
  }
  return info;
}

constexpr std::string_view kCsumMismatch =
    "fixed index: digest checksum mismatch (digests corrupted)";

}  // namespace

Result<FixedIndex> FixedIndex::Decode(ByteSpan file) {
  const uint8_t* h = file.data();
  CAIRN_ASSIGN_OR_RETURN(FixedIndexInfo info, DecodeHeader(h, file.size()));
  std::vector<crypto::Digest> digests(info.chunk_count);
  const uint8_t* p = h + kFixedIndexHeaderSize;
  for (auto& d : digests) {
    std::memcpy(d.data(), p, 32);
    p += 32;
  }
  FixedIndex index(info.image_size, info.chunk_size, std::move(digests));
  if (index.csum_ != info.csum) return DataLossError(std::string(kCsumMismatch));
  return index;
}

Result<FixedIndexInfo> ScanFixedIndex(
    Env& env, const std::string& path,
    const std::function<void(size_t, const crypto::Digest&)>& fn) {
  auto scan = [&]() -> Result<FixedIndexInfo> {
    CAIRN_ASSIGN_OR_RETURN(auto file, env.OpenReadable(path));
    CAIRN_ASSIGN_OR_RETURN(uint64_t size, file->Size());
    // 1 MiB windows (32 768 digests): memory stays constant, reads stay large.
    constexpr size_t kWindow = 1 << 20;
    Bytes buf(std::min<uint64_t>(std::max<uint64_t>(size, kFixedIndexHeaderSize), kWindow));
    // ReadAt reads all it is asked for unless the file ends first.
    auto read_full = [&](uint64_t offset, std::span<uint8_t> out) -> Status {
      CAIRN_ASSIGN_OR_RETURN(size_t n, file->ReadAt(offset, out));
      if (n < out.size()) {
        return DataLossError(fmt::format("fixed index: file ended at {} bytes, expected {}",
                                         offset + n, size));
      }
      return Status::Ok();
    };
    if (size >= kFixedIndexHeaderSize) {
      CAIRN_RETURN_IF_ERROR(read_full(0, std::span(buf.data(), kFixedIndexHeaderSize)));
    }
    CAIRN_ASSIGN_OR_RETURN(FixedIndexInfo info, DecodeHeader(buf.data(), size));
    crypto::Sha256Hasher csum;
    crypto::Digest d;
    size_t i = 0;
    for (uint64_t off = kFixedIndexHeaderSize; off < size;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
      CAIRN_RETURN_IF_ERROR(read_full(off, std::span(buf.data(), n)));
      csum.Update(ByteSpan(buf.data(), n));
      for (size_t k = 0; k < n; k += 32, ++i) {
        std::memcpy(d.data(), buf.data() + k, 32);
        fn(i, d);
      }
      off += n;
    }
    if (csum.Finish() != info.csum) return DataLossError(std::string(kCsumMismatch));
    return info;
  };
  auto info = scan();
  if (!info.ok()) return info.status().WithContext(path);
  return info;
}

Result<FixedIndex> ReadFixedIndex(Env& env, const std::string& path) {
  constexpr uint64_t kMaxFile =
      kFixedIndexHeaderSize + (kMaxImageSize / kMinChunkSize) * 32;
  CAIRN_ASSIGN_OR_RETURN(Bytes data, ReadWholeFile(env, path, kMaxFile));
  auto index = FixedIndex::Decode(data);
  if (!index.ok()) return index.status().WithContext(path);
  return index;
}

crypto::Digest ZeroChunkDigest(uint32_t length, const crypto::CryptConfig* crypt) {
  if (crypt != nullptr) return crypt->ZeroChunkId(length);
  static const crypto::Digest kDefault = [] {
    Bytes zeros(kDefaultChunkSize, 0);
    return crypto::Sha256(zeros);
  }();
  if (length == kDefaultChunkSize) return kDefault;
  Bytes zeros(length, 0);
  return crypto::Sha256(zeros);
}

}  // namespace cairn::index
