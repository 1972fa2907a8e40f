// Chunker: content-defined chunking (FastCDC: a gear rolling hash with
// normalized chunking) over the payload stream of a tree archive. Cut points
// depend only on the bytes near them, so inserting bytes near the start of a
// large file moves the cuts around the insertion and leaves the chunks of
// the rest unchanged. docs/ARCHITECTURE.md says why FastCDC and these sizes.
//
// The chunker is a scanner: it is fed the stream in pieces of any size and
// says where the current chunk ends; the caller owns the bytes.
//
// Thread safety: one thread at a time; independent chunkers share nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"

namespace cairn::index {

struct ChunkerParams {
  uint32_t min_size = 512u << 10;  // no cut before this many bytes
  uint32_t avg_size = 2u << 20;    // the expected chunk size, a power of two
  uint32_t max_size = 8u << 20;    // always cut here
};

class Chunker {
 public:
  // REQUIRES: 64 <= min_size < avg_size < max_size <= blob::kMaxRawSize,
  // avg_size a power of two.
  explicit Chunker(const ChunkerParams& params = {});

  // Scans `data`, the next bytes of the stream. Returns the number of bytes
  // of `data` that complete the current chunk (1..data.size()), after which
  // the next chunk starts; or 0 when the chunk goes on past `data` (all of
  // it belongs to the current chunk).
  size_t FindCut(ByteSpan data);

  // Bytes in the current (unfinished) chunk so far.
  uint64_t pending() const { return pending_; }

  // Forgets the current chunk: the next byte starts a new one (a forced cut,
  // as before chunks of a previous snapshot are reused).
  void Reset() {
    pending_ = 0;
    hash_ = 0;
  }

  const ChunkerParams& params() const { return params_; }

 private:
  ChunkerParams params_;
  uint64_t mask_small_;  // harder to match: used below avg_size
  uint64_t mask_large_;  // easier to match: used from avg_size on
  uint64_t pending_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace cairn::index
