// Fuzz target for the blob decoder (blob::Check, blob::Decode, blob::DecodeView).
//
// Each input is decoded as given, and once more with its CRC recomputed
// ("resealed") so the fuzzer reaches the checks and the zstd path behind the
// CRC. Invariants: Check and Decode agree on success; a decoded plaintext has
// the header's raw size and survives an encode/decode round trip.
#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "blob/blob.h"
#include "format/coding.h"
#include "format/crc32c.h"

namespace {

using cairn::ByteSpan;
using cairn::Bytes;

#define FUZZ_CHECK(cond)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      __builtin_fprintf(stderr, "blob_fuzz: invariant failed: %s\n", #cond);   \
      std::abort();                                                   \
    }                                                                 \
  } while (0)

constexpr size_t kOffCrc = 60;

// With a key: another key's blob or a failed authentication is an error of
// the two expected kinds; what decodes re-encrypts and decodes again.
void DecodeWithKey(ByteSpan data) {
  static const auto key = [] {
    cairn::crypto::Key256 k;
    k.fill(0x42);
    return cairn::crypto::CryptConfig::FromMasterKey(k);
  }();
  auto plain = cairn::blob::Decode(data, key.get());
  if (!plain.ok()) {
    FUZZ_CHECK(plain.status().code() == cairn::StatusCode::kDataLoss ||
               plain.status().code() == cairn::StatusCode::kUnauthenticated);
    return;
  }
  cairn::blob::EncodeOptions options;
  options.crypt = key.get();
  auto again = cairn::blob::Encode(*plain, options);
  FUZZ_CHECK(again.ok());
  auto back = cairn::blob::DecodeChunk(*again, key->ChunkId(*plain), key.get());
  FUZZ_CHECK(back.ok() && *back == *plain);
}

void DecodeOne(ByteSpan data) {
  auto header = cairn::blob::Check(data);
  auto plain = cairn::blob::Decode(data);
  if (!header.ok()) {
    FUZZ_CHECK(!plain.ok());
    Bytes scratch;
    FUZZ_CHECK(!cairn::blob::DecodeView(data, &scratch).ok());
    FUZZ_CHECK(header.status().code() == cairn::StatusCode::kDataLoss);
    return;
  }
  FUZZ_CHECK(header->stored_size == data.size() - cairn::blob::kHeaderSize);
  FUZZ_CHECK(header->raw_size <= cairn::blob::kMaxRawSize);
  if (!plain.ok()) {
    // Unauthenticated: encrypted, and no key given (or another key).
    FUZZ_CHECK(plain.status().code() == cairn::StatusCode::kDataLoss ||
               plain.status().code() == cairn::StatusCode::kUnauthenticated);
    DecodeWithKey(data);
    return;
  }
  FUZZ_CHECK(plain->size() == header->raw_size);
  // The hot-path view agrees with the copying decoder.
  Bytes scratch(7, 0xEE);
  auto view = cairn::blob::DecodeView(data, &scratch);
  FUZZ_CHECK(view.ok());
  FUZZ_CHECK(std::equal(view->begin(), view->end(), plain->begin(), plain->end()));
  auto again = cairn::blob::Encode(*plain);
  FUZZ_CHECK(again.ok());
  Bytes into(3, 0x55);
  FUZZ_CHECK(cairn::blob::EncodeInto(*plain, {}, &into).ok());
  FUZZ_CHECK(into == *again);
  auto back = cairn::blob::DecodeChunk(*again, cairn::crypto::Sha256(*plain));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(*back == *plain);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeOne(ByteSpan(data, size));
  if (size >= cairn::blob::kHeaderSize) {
    Bytes resealed(data, data + size);
    uint32_t crc = cairn::format::Crc32c(ByteSpan(resealed.data(), kOffCrc));
    crc = cairn::format::Crc32cExtend(crc, ByteSpan(resealed).subspan(cairn::blob::kHeaderSize));
    cairn::format::PutU32(resealed.data() + kOffCrc, crc);
    DecodeOne(resealed);
  }
  return 0;
}
