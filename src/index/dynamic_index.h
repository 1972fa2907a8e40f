// DynamicIndex: the index of a stream cut into chunks of varying size (the
// two streams of a tree archive: NAME.tree.meta.didx and NAME.tree.data.didx).
// Entries are (end offset, SHA-256) in stream order, 40 bytes each, after a
// 4096-byte header holding the stream size, the entry count, a SHA-256 over
// all entries (the checksum the manifest records) and a CRC32C over itself.
// Ends strictly increase, so the chunk holding an offset is a binary search.
// docs/FORMAT.md has the byte layout.
//
// Thread safety: immutable after construction; share freely.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/env.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::index {

inline constexpr size_t kDynamicIndexHeaderSize = 4096;
inline constexpr size_t kDynamicIndexEntrySize = 40;

struct DynamicEntry {
  uint64_t end = 0;  // stream offset just past the chunk
  crypto::Digest digest{};
};

class DynamicIndex {
 public:
  DynamicIndex();  // an empty stream
  // REQUIRES: ends strictly increasing, each chunk 1..blob::kMaxRawSize bytes.
  explicit DynamicIndex(std::vector<DynamicEntry> entries);

  // Decodes an index file held in memory. DataLoss on any inconsistency
  // (magic, version, CRC, count against file size, ends not increasing, a
  // chunk longer than blob::kMaxRawSize, size against the last end, csum).
  static Result<DynamicIndex> Decode(ByteSpan file);
  Bytes Encode() const;

  uint64_t size() const { return entries_.empty() ? 0 : entries_.back().end; }
  size_t chunk_count() const { return entries_.size(); }
  const DynamicEntry& entry(size_t i) const { return entries_[i]; }
  const std::vector<DynamicEntry>& entries() const { return entries_; }
  const crypto::Digest& digest(size_t i) const { return entries_[i].digest; }
  uint64_t ChunkStart(size_t i) const { return i == 0 ? 0 : entries_[i - 1].end; }
  uint32_t ChunkLength(size_t i) const {
    return static_cast<uint32_t>(entries_[i].end - ChunkStart(i));
  }
  // The chunk holding stream offset `offset`. REQUIRES: offset < size().
  size_t FindChunk(uint64_t offset) const;

  // SHA-256 over all entries as encoded: the checksum the manifest records.
  const crypto::Digest& csum() const { return csum_; }

 private:
  std::vector<DynamicEntry> entries_;
  crypto::Digest csum_{};
};

// Reads and decodes the index file at `path`; errors name the path.
Result<DynamicIndex> ReadDynamicIndex(Env& env, const std::string& path);

}  // namespace cairn::index
