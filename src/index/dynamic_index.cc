#include "index/dynamic_index.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "blob/blob.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"

namespace cairn::index {
namespace {

// Header byte offsets (docs/FORMAT.md, "Dynamic index").
constexpr size_t kOffVersion = 8;
constexpr size_t kOffReserved = 10;  // 6 bytes, zero
constexpr size_t kOffStreamSize = 16;
constexpr size_t kOffCount = 24;
constexpr size_t kOffCsum = 32;
constexpr size_t kOffHeaderCrc = 64;  // CRC32C of bytes [0, 64); zero up to 4096

// Largest index file accepted: 2^50 bytes of stream in chunks of at least
// one byte would be absurd; 64 Mi entries (2.5 GiB of index) is plenty.
constexpr uint64_t kMaxEntries = uint64_t{64} << 20;

void EncodeEntry(const DynamicEntry& e, uint8_t* p) {
  format::PutU64(p, e.end);
  std::memcpy(p + 8, e.digest.data(), 32);
}

crypto::Digest EntriesCsum(const std::vector<DynamicEntry>& entries) {
  crypto::Sha256Hasher h;
  uint8_t buf[kDynamicIndexEntrySize];
  for (const auto& e : entries) {
    EncodeEntry(e, buf);
    h.Update(ByteSpan(buf, sizeof buf));
  }
  return h.Finish();
}

}  // namespace

DynamicIndex::DynamicIndex() : csum_(EntriesCsum({})) {}

DynamicIndex::DynamicIndex(std::vector<DynamicEntry> entries) : entries_(std::move(entries)) {
  csum_ = EntriesCsum(entries_);
}

size_t DynamicIndex::FindChunk(uint64_t offset) const {
  auto it = std::upper_bound(entries_.begin(), entries_.end(), offset,
                             [](uint64_t off, const DynamicEntry& e) { return off < e.end; });
  return static_cast<size_t>(it - entries_.begin());
}

Bytes DynamicIndex::Encode() const {
  Bytes out(kDynamicIndexHeaderSize + entries_.size() * kDynamicIndexEntrySize, 0);
  uint8_t* h = out.data();
  std::memcpy(h, format::kDynamicIndexMagic.data(), 8);
  format::PutU16(h + kOffVersion, format::kDynamicIndexVersion);
  format::PutU64(h + kOffStreamSize, size());
  format::PutU64(h + kOffCount, entries_.size());
  std::memcpy(h + kOffCsum, csum_.data(), 32);
  format::PutU32(h + kOffHeaderCrc, format::Crc32c(ByteSpan(h, kOffHeaderCrc)));
  uint8_t* p = h + kDynamicIndexHeaderSize;
  for (const auto& e : entries_) {
    EncodeEntry(e, p);
    p += kDynamicIndexEntrySize;
  }
  return out;
}

Result<DynamicIndex> DynamicIndex::Decode(ByteSpan file) {
  if (file.size() < kDynamicIndexHeaderSize) {
    return DataLossError(fmt::format("dynamic index truncated: {} bytes, header needs {}",
                                     file.size(), kDynamicIndexHeaderSize));
  }
  const uint8_t* h = file.data();
  if (std::memcmp(h, format::kDynamicIndexMagic.data(), 8) != 0) {
    return DataLossError("not a cairn dynamic index (bad magic)");
  }
  uint32_t header_crc = format::GetU32(h + kOffHeaderCrc);
  uint32_t computed = format::Crc32c(ByteSpan(h, kOffHeaderCrc));
  if (header_crc != computed) {
    return DataLossError(fmt::format(
        "dynamic index header CRC mismatch (stored 0x{:08x}, computed 0x{:08x})", header_crc,
        computed));
  }
  uint16_t version = format::GetU16(h + kOffVersion);
  if (version != format::kDynamicIndexVersion) {
    return DataLossError(fmt::format("unsupported dynamic index version {}", version));
  }
  if (!std::all_of(h + kOffReserved, h + kOffStreamSize, [](uint8_t b) { return b == 0; }) ||
      !std::all_of(h + kOffHeaderCrc + 4, h + kDynamicIndexHeaderSize,
                   [](uint8_t b) { return b == 0; })) {
    return DataLossError("dynamic index: reserved header bytes not zero");
  }
  uint64_t stream_size = format::GetU64(h + kOffStreamSize);
  uint64_t count = format::GetU64(h + kOffCount);
  if (count > kMaxEntries) {
    return DataLossError(fmt::format("dynamic index: {} entries exceed the limit", count));
  }
  if (file.size() - kDynamicIndexHeaderSize != count * kDynamicIndexEntrySize) {
    return DataLossError(fmt::format(
        "dynamic index: {} bytes of entries, expected {} for {} entries (truncated?)",
        file.size() - kDynamicIndexHeaderSize, count * kDynamicIndexEntrySize, count));
  }
  std::vector<DynamicEntry> entries(count);
  const uint8_t* p = h + kDynamicIndexHeaderSize;
  uint64_t prev = 0;
  for (size_t i = 0; i < count; ++i, p += kDynamicIndexEntrySize) {
    DynamicEntry& e = entries[i];
    e.end = format::GetU64(p);
    std::memcpy(e.digest.data(), p + 8, 32);
    if (e.end <= prev || e.end - prev > blob::kMaxRawSize) {
      return DataLossError(fmt::format(
          "dynamic index: entry {} ends at {} after {} (chunks must be 1 to {} bytes)", i, e.end,
          prev, blob::kMaxRawSize));
    }
    prev = e.end;
  }
  if (prev != stream_size) {
    return DataLossError(fmt::format("dynamic index: entries end at {}, header says {} bytes",
                                     prev, stream_size));
  }
  DynamicIndex index(std::move(entries));
  if (std::memcmp(index.csum_.data(), h + kOffCsum, 32) != 0) {
    return DataLossError("dynamic index: entry checksum mismatch (entries corrupted)");
  }
  return index;
}

Result<DynamicIndex> ReadDynamicIndex(Env& env, const std::string& path) {
  constexpr uint64_t kMaxFile = kDynamicIndexHeaderSize + kMaxEntries * kDynamicIndexEntrySize;
  CAIRN_ASSIGN_OR_RETURN(Bytes data, ReadWholeFile(env, path, kMaxFile));
  auto index = DynamicIndex::Decode(data);
  if (!index.ok()) return index.status().WithContext(path);
  return index;
}

}  // namespace cairn::index
