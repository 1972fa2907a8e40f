// StreamReader: random reads of one archive's bytes (an image, or a tree's
// payload stream) without restoring it, through the shared ChunkCache, with
// Readahead for sequential readers. `cairn mount` and `cairn nbd` serve
// every read through one of these.
//
// A read copies the bytes it wants out of each chunk it touches: zero
// chunks are zeros without any fetch; other chunks come from the cache,
// which loads (reads, decodes and checks; chunkio/chunk_read.h) a chunk
// once however many readers want it. A chunk that cannot be read or fails
// its checks fails exactly the reads that touch it (DataLoss, reported
// once by the cache); the rest of the archive stays readable.
//
// Thread safety: Read may be called concurrently from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "access/chunk_cache.h"
#include "access/chunk_map.h"
#include "access/readahead.h"

namespace cairn::access {

struct StreamReaderOptions {
  ChunkCache* cache = nullptr;            // REQUIRED; outlives the reader
  store::ChunkSource* source = nullptr;   // REQUIRED; outlives the reader
  const crypto::CryptConfig* crypt = nullptr;  // the snapshot's key; outlives the reader
  std::string description;  // "archive disk0.img of vm/100/2026-…", for messages
  ReadaheadOptions readahead;
};

struct StreamReaderStats {
  uint64_t reads = 0;
  uint64_t bytes_read = 0;     // bytes handed to readers
  uint64_t failed_reads = 0;
  ReadaheadStats readahead;
};

class StreamReader {
 public:
  StreamReader(std::unique_ptr<ChunkMap> map, const StreamReaderOptions& options);
  ~StreamReader();

  uint64_t size() const { return map_->size(); }
  const ChunkMap& map() const { return *map_; }
  const std::string& description() const { return options_.description; }

  // Fills `out` with the bytes at [offset, offset + out.size()). OutOfRange
  // when that is not within the stream; DataLoss naming the chunk when one
  // it needs is damaged; what the source says when it cannot be read.
  Status Read(uint64_t offset, MutableByteSpan out);

  // Chunk `i`, decoded, through the cache (empty for a zero chunk is not
  // special-cased: callers check map().IsZero first).
  Result<ChunkRef> GetChunk(size_t i);

  StreamReaderStats stats() const;

 private:
  std::unique_ptr<ChunkMap> map_;
  const StreamReaderOptions options_;
  Readahead readahead_;
  std::atomic<uint64_t> reads_{0};
  std::atomic<uint64_t> bytes_read_{0};
  std::atomic<uint64_t> failed_reads_{0};
};

}  // namespace cairn::access
