// Fuzz target for the tree metadata stream decoder (tree::TreeDecoder).
//
// The first 8 bytes of the input (little-endian) give the payload stream's
// size, the rest is the stream. Each input is decoded in one piece and again
// in small pieces cut by the bytes themselves, so the buffer refill paths are
// reached too. Invariants: decoding never crashes, fails only with DataLoss,
// and gives the same result either way; a decoded tree re-encodes to exactly
// the input stream (the encoding is canonical) and decodes to the same
// entries.
#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "format/coding.h"
#include "tree/tree_format.h"

namespace {

using cairn::Bytes;
using cairn::ByteSpan;
using cairn::tree::Entry;

#define FUZZ_CHECK(cond)                                            \
  do {                                                              \
    if (!(cond)) {                                                  \
      __builtin_fprintf(stderr, "tree_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                 \
    }                                                               \
  } while (0)

// Decodes `stream` from pieces of 1..16 bytes, sized by the stream's bytes.
cairn::Result<std::vector<Entry>> DecodeInPieces(ByteSpan stream, uint64_t payload_size) {
  size_t pos = 0;
  cairn::tree::TreeDecoder decoder(
      [&]() -> cairn::Result<ByteSpan> {
        size_t n =
            std::min<size_t>(1 + (pos < stream.size() ? stream[pos] % 16 : 0), stream.size() - pos);
        ByteSpan piece = stream.subspan(pos, n);
        pos += n;
        return piece;
      },
      payload_size);
  std::vector<Entry> entries;
  while (true) {
    auto e = decoder.Next();
    if (!e.ok()) return e.status();
    if (!*e) return entries;
    entries.push_back(std::move(**e));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 8) return 0;
  const uint64_t payload_size = cairn::format::GetU64(data);
  const ByteSpan stream(data + 8, size - 8);

  auto decoded = cairn::tree::DecodeTree(stream, payload_size);
  auto pieces = DecodeInPieces(stream, payload_size);
  FUZZ_CHECK(decoded.ok() == pieces.ok());
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == cairn::StatusCode::kDataLoss);
    FUZZ_CHECK(pieces.status().code() == cairn::StatusCode::kDataLoss);
    return 0;
  }
  FUZZ_CHECK(*pieces == *decoded);
  FUZZ_CHECK(!decoded->empty() && decoded->front().path.empty());

  auto encoded = cairn::tree::EncodeTree(*decoded);
  FUZZ_CHECK(encoded.ok());
  FUZZ_CHECK(encoded->size() == stream.size());
  FUZZ_CHECK(std::equal(encoded->begin(), encoded->end(), stream.begin()));
  auto again = cairn::tree::DecodeTree(*encoded, payload_size);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(*again == *decoded);
  return 0;
}
