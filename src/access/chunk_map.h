// ChunkMap: a byte stream as a row of chunks, the view instant access reads
// through: an image (fixed index: equal chunks, a short tail) or a tree's
// payload stream (dynamic index: chunks cut by content). Zero chunks are
// known by their id and never fetched (index::ZeroChunkDigest for images,
// chunkio::FindZeroChunks for payload streams).
//
// Thread safety: const after construction; any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crypto/crypt_config.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "nbd/block_device.h"

namespace cairn::access {

class ChunkMap {
 public:
  virtual ~ChunkMap() = default;
  virtual uint64_t size() const = 0;   // bytes of the stream
  virtual size_t count() const = 0;    // chunks
  // The chunk holding byte `offset`. REQUIRES: offset < size().
  virtual size_t Find(uint64_t offset) const = 0;
  virtual uint64_t Start(size_t i) const = 0;
  virtual uint32_t Length(size_t i) const = 0;
  virtual const crypto::Digest& Id(size_t i) const = 0;
  virtual bool IsZero(size_t i) const = 0;
  uint64_t End(size_t i) const { return Start(i) + Length(i); }
};

// "archive disk0.img of vm/100/…, chunk 5 (bytes 20971520-25165823)": where
// chunk `i` of a stream described as `description` lies, for messages.
std::string DescribeChunk(const std::string& description, const ChunkMap& map, size_t i);

// The extents of [offset, offset + length) by chunk: runs of chunks for
// which `zero` says the same, merged, at most 1024 chunks' worth.
// REQUIRES: length > 0 and the range within the stream.
std::vector<nbd::Extent> ChunkExtents(const ChunkMap& map, uint64_t offset, uint64_t length,
                                      const std::function<bool(size_t chunk)>& zero);

// An image archive's chunks. `crypt`: the snapshot's key (zero ids are keyed).
std::unique_ptr<ChunkMap> MapImage(index::FixedIndex idx, const crypto::CryptConfig* crypt);
// A tree archive's payload stream.
std::unique_ptr<ChunkMap> MapPayload(index::DynamicIndex idx, const crypto::CryptConfig* crypt);

}  // namespace cairn::access
