// Fuzz target for the fixed index decoder (index::FixedIndex::Decode).
//
// Each input is decoded as given, and once more with its header CRC
// recomputed so the fuzzer reaches the field checks behind it. Invariants:
// a decoded index re-encodes to exactly the input bytes (the encoding is
// canonical), and its chunk lengths add up to the image size.
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include "format/coding.h"
#include "format/crc32c.h"
#include "index/fixed_index.h"

namespace {

using cairn::ByteSpan;
using cairn::Bytes;

#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      __builtin_fprintf(stderr, "fixed_index_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

constexpr size_t kOffHeaderCrc = 64;

void DecodeOne(ByteSpan data) {
  auto idx = cairn::index::FixedIndex::Decode(data);
  if (!idx.ok()) {
    FUZZ_CHECK(idx.status().code() == cairn::StatusCode::kDataLoss);
    return;
  }
  Bytes encoded = idx->Encode();
  FUZZ_CHECK(encoded.size() == data.size());
  FUZZ_CHECK(std::equal(encoded.begin(), encoded.end(), data.begin()));
  uint64_t total = 0;
  for (size_t i = 0; i < idx->chunk_count(); ++i) {
    uint32_t len = idx->ChunkLength(i);
    FUZZ_CHECK(len > 0 && len <= idx->chunk_size());
    total += len;
  }
  FUZZ_CHECK(total == idx->image_size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeOne(ByteSpan(data, size));
  if (size >= kOffHeaderCrc + 4) {
    Bytes resealed(data, data + size);
    cairn::format::PutU32(resealed.data() + kOffHeaderCrc,
                          cairn::format::Crc32c(ByteSpan(resealed.data(), kOffHeaderCrc)));
    DecodeOne(resealed);
  }
  return 0;
}
