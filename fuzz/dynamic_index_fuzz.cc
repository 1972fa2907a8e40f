// Fuzz target for the dynamic index decoder (index::DynamicIndex::Decode).
//
// Each input is decoded as given, and once more with its entry checksum and
// header CRC recomputed so the fuzzer reaches the field checks behind them.
// Invariants: a decoded index re-encodes to exactly the input bytes (the
// encoding is canonical), its chunks are 1..blob::kMaxRawSize bytes and add
// up to the stream size, and FindChunk maps each chunk's first, middle and
// last byte to that chunk.
#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "blob/blob.h"
#include "crypto/sha256.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "index/dynamic_index.h"

namespace {

using cairn::Bytes;
using cairn::ByteSpan;
using cairn::index::kDynamicIndexHeaderSize;

#define FUZZ_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      __builtin_fprintf(stderr, "dynamic_index_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

constexpr size_t kOffCsum = 32;
constexpr size_t kOffHeaderCrc = 64;

void DecodeOne(ByteSpan data) {
  auto idx = cairn::index::DynamicIndex::Decode(data);
  if (!idx.ok()) {
    FUZZ_CHECK(idx.status().code() == cairn::StatusCode::kDataLoss);
    return;
  }
  Bytes encoded = idx->Encode();
  FUZZ_CHECK(encoded.size() == data.size());
  FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), data.begin()));
  uint64_t total = 0;
  for (size_t i = 0; i < idx->chunk_count(); ++i) {
    uint64_t start = idx->ChunkStart(i);
    uint32_t len = idx->ChunkLength(i);
    FUZZ_CHECK(start == total);
    FUZZ_CHECK(len > 0 && len <= cairn::blob::kMaxRawSize);
    FUZZ_CHECK(idx->FindChunk(start) == i);
    FUZZ_CHECK(idx->FindChunk(start + len / 2) == i);
    FUZZ_CHECK(idx->FindChunk(start + len - 1) == i);
    total += len;
  }
  FUZZ_CHECK(total == idx->size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeOne(ByteSpan(data, size));
  if (size >= kDynamicIndexHeaderSize) {
    Bytes resealed(data, data + size);
    cairn::crypto::Digest csum =
        cairn::crypto::Sha256(ByteSpan(resealed).subspan(kDynamicIndexHeaderSize));
    std::copy(csum.begin(), csum.end(), resealed.begin() + kOffCsum);
    cairn::format::PutU32(resealed.data() + kOffHeaderCrc,
                          cairn::format::Crc32c(ByteSpan(resealed.data(), kOffHeaderCrc)));
    DecodeOne(resealed);
  }
  return 0;
}
