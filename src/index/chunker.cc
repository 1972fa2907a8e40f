#include "index/chunker.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstdlib>

#include "base/splitmix64.h"
#include "blob/blob.h"

namespace cairn::index {
namespace {

// The gear table: 256 pseudo-random 64-bit values, one per byte value,
// generated at compile time by splitmix64 from a fixed seed. The table is
// part of the format in effect: changing the seed or the generator moves
// every cut point, and the chunks of earlier snapshots stop being reused.
constexpr uint64_t kGearSeed = 0x63616972'6e676561;  // "cairngea"

constexpr std::array<uint64_t, 256> MakeGearTable() {
  std::array<uint64_t, 256> table{};
  uint64_t state = kGearSeed;
  for (auto& g : table) g = SplitMix64Next(state);
  return table;
}

constexpr std::array<uint64_t, 256> kGear = MakeGearTable();

// A mask of `bits` one-bits spread over the top 48 bits of the word, as
// FastCDC's masks are. With the gear hash, bit k depends on the last k+1
// bytes only, so low bits see too few bytes; bits 16..63 see 17..64.
// The bits are taken in van der Corput order (bit-reversed 6-bit counter,
// values >= 48 skipped: bit 63, 31, 47, 55, 23, 39, ...), so every prefix is
// spread out and the masks are nested: SpreadMask(a) has all the bits of
// SpreadMask(b) for a > b. Nesting means a position that matches mask_small
// also matches mask_large, which lets a chunker that shifted into the other
// regime (after an insertion) still find the same cut. REQUIRES: bits <= 48.
constexpr uint64_t SpreadMask(int bits) {
  uint64_t mask = 0;
  for (unsigned r = 0; r < 64 && bits > 0; ++r) {
    unsigned j = 0;  // r with its six bits reversed
    for (int b = 0; b < 6; ++b) j |= ((r >> b) & 1u) << (5 - b);
    if (j >= 48) continue;
    mask |= uint64_t{1} << (63 - j);
    --bits;
  }
  return mask;
}
static_assert(std::popcount(SpreadMask(23)) == 23 && std::popcount(SpreadMask(48)) == 48);
static_assert(SpreadMask(48) == ~uint64_t{0} << 16);
static_assert((SpreadMask(25) & SpreadMask(21)) == SpreadMask(21));
static_assert(SpreadMask(3) == (uint64_t{1} << 63 | uint64_t{1} << 31 | uint64_t{1} << 47));

// Rolls the hash over data[begin, end) and returns the offset just past the
// first byte after which (hash & mask) == 0, or 0 when no byte matches; the
// rolled hash is left in `*hash` either way. Unrolled by eight: the only
// branches per byte are the mask tests, which are almost never taken.
size_t ScanForCut(const uint8_t* data, size_t begin, size_t end, uint64_t mask, uint64_t* hash) {
  uint64_t h = *hash;
  size_t i = begin;
#define CAIRN_GEAR_STEP(k)             \
  h = (h << 1) + kGear[data[i + (k)]]; \
  if ((h & mask) == 0) {               \
    *hash = h;                         \
    return i + (k) + 1;                \
  }
  for (; i + 8 <= end; i += 8) {
    CAIRN_GEAR_STEP(0)
    CAIRN_GEAR_STEP(1)
    CAIRN_GEAR_STEP(2)
    CAIRN_GEAR_STEP(3)
    CAIRN_GEAR_STEP(4)
    CAIRN_GEAR_STEP(5)
    CAIRN_GEAR_STEP(6)
    CAIRN_GEAR_STEP(7)
  }
  for (; i < end; ++i) {
    CAIRN_GEAR_STEP(0)
  }
#undef CAIRN_GEAR_STEP
  *hash = h;
  return 0;
}

bool ValidParams(const ChunkerParams& p) {
  return p.min_size >= 64 && p.min_size < p.avg_size && p.avg_size < p.max_size &&
         p.max_size <= blob::kMaxRawSize && std::has_single_bit(p.avg_size);
}

}  // namespace

Chunker::Chunker(const ChunkerParams& params) : params_(params) {
  if (!ValidParams(params)) {
    // A programming error (the parameters are constants of the caller), not
    // an input error: stop before writing chunks nobody could reproduce.
    std::fprintf(stderr,
                 "cairn: Chunker: invalid parameters min=%u avg=%u max=%u (need 64 <= min < avg "
                 "< max <= %u, avg a power of two)\n",
                 params.min_size, params.avg_size, params.max_size, blob::kMaxRawSize);
    std::abort();
  }
  // Normalized chunking (FastCDC, level 2): log2(avg) + 2 bits before
  // avg_size (a cut is 4x less likely there), log2(avg) - 2 bits from it on
  // (4x more likely), so chunk sizes bunch around avg_size instead of
  // spreading out exponentially.
  const int avg_bits = std::countr_zero(params.avg_size);  // 7..23: avg in [128, 8 MiB]
  mask_small_ = SpreadMask(avg_bits + 2);
  mask_large_ = SpreadMask(avg_bits - 2);
}

size_t Chunker::FindCut(ByteSpan data) {
  const uint8_t* p = data.data();
  const size_t n = data.size();
  const uint64_t pos = pending_;  // offset of data[0] in the current chunk; < max_size
  size_t i = 0;
  // Cut-point skipping: no cut can fall in the first min_size bytes, so they
  // are not hashed; the hash starts from zero at min_size, so each cut
  // depends only on the bytes between min_size and it (the last 64 of them,
  // once 64 have been hashed), never on the bytes before.
  if (pos < params_.min_size) i = std::min<uint64_t>(n, params_.min_size - pos);
  if (i < n && pos + i < params_.avg_size) {
    size_t end = std::min<uint64_t>(n, params_.avg_size - pos);
    if (size_t cut = ScanForCut(p, i, end, mask_small_, &hash_); cut != 0) {
      Reset();
      return cut;
    }
    i = end;
  }
  if (i < n) {
    size_t end = std::min<uint64_t>(n, params_.max_size - pos);
    size_t cut = ScanForCut(p, i, end, mask_large_, &hash_);
    if (cut == 0 && pos + end == params_.max_size) cut = end;  // forced cut
    if (cut != 0) {
      Reset();
      return cut;
    }
  }
  pending_ += n;
  return 0;
}

}  // namespace cairn::index
