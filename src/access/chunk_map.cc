#include "access/chunk_map.h"

#include <utility>

#include <fmt/format.h>

#include "chunkio/tree_reader.h"

namespace cairn::access {
namespace {

class ImageMap : public ChunkMap {
 public:
  ImageMap(index::FixedIndex idx, const crypto::CryptConfig* crypt) : idx_(std::move(idx)) {
    if (idx_.chunk_count() == 0) return;
    zero_full_ = index::ZeroChunkDigest(idx_.chunk_size(), crypt);
    tail_len_ = idx_.ChunkLength(idx_.chunk_count() - 1);
    zero_tail_ = tail_len_ == idx_.chunk_size() ? zero_full_
                                                 : index::ZeroChunkDigest(tail_len_, crypt);
  }
  uint64_t size() const override { return idx_.image_size(); }
  size_t count() const override { return idx_.chunk_count(); }
  size_t Find(uint64_t offset) const override { return offset / idx_.chunk_size(); }
  uint64_t Start(size_t i) const override { return idx_.ChunkOffset(i); }
  uint32_t Length(size_t i) const override { return idx_.ChunkLength(i); }
  const crypto::Digest& Id(size_t i) const override { return idx_.digest(i); }
  bool IsZero(size_t i) const override {
    const uint32_t len = idx_.ChunkLength(i);
    return (len == idx_.chunk_size() && idx_.digest(i) == zero_full_) ||
           (len == tail_len_ && idx_.digest(i) == zero_tail_);
  }

 private:
  index::FixedIndex idx_;
  crypto::Digest zero_full_{};
  crypto::Digest zero_tail_{};
  uint32_t tail_len_ = 0;
};

class PayloadMap : public ChunkMap {
 public:
  PayloadMap(index::DynamicIndex idx, const crypto::CryptConfig* crypt)
      : idx_(std::move(idx)), zero_(chunkio::FindZeroChunks(idx_, crypt)) {}
  uint64_t size() const override { return idx_.size(); }
  size_t count() const override { return idx_.chunk_count(); }
  size_t Find(uint64_t offset) const override { return idx_.FindChunk(offset); }
  uint64_t Start(size_t i) const override { return idx_.ChunkStart(i); }
  uint32_t Length(size_t i) const override { return idx_.ChunkLength(i); }
  const crypto::Digest& Id(size_t i) const override { return idx_.digest(i); }
  bool IsZero(size_t i) const override { return zero_[i] != 0; }

 private:
  index::DynamicIndex idx_;
  std::vector<uint8_t> zero_;
};

}  // namespace

std::string DescribeChunk(const std::string& description, const ChunkMap& map, size_t i) {
  return fmt::format("{}, chunk {} (bytes {}-{})", description, i, map.Start(i), map.End(i) - 1);
}

std::vector<nbd::Extent> ChunkExtents(const ChunkMap& map, uint64_t offset, uint64_t length,
                                      const std::function<bool(size_t chunk)>& zero) {
  constexpr size_t kMaxChunks = 1024;
  std::vector<nbd::Extent> out;
  const uint64_t end = offset + length;
  size_t seen = 0;
  for (size_t c = map.Find(offset); c < map.count() && map.Start(c) < end && seen < kMaxChunks;
       ++c, ++seen) {
    const uint64_t from = std::max(offset, map.Start(c));
    const uint64_t to = std::min(end, map.End(c));
    const bool z = zero(c);
    if (!out.empty() && out.back().zero == z) {
      out.back().length += to - from;
    } else {
      out.push_back(nbd::Extent{to - from, z});
    }
  }
  return out;
}

std::unique_ptr<ChunkMap> MapImage(index::FixedIndex idx, const crypto::CryptConfig* crypt) {
  return std::make_unique<ImageMap>(std::move(idx), crypt);
}

std::unique_ptr<ChunkMap> MapPayload(index::DynamicIndex idx, const crypto::CryptConfig* crypt) {
  return std::make_unique<PayloadMap>(std::move(idx), crypt);
}

}  // namespace cairn::access
