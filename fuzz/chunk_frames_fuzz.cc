// Fuzz target for the client's parser of a batched chunk download answer
// (protocol::ChunkFrameParser, docs/FORMAT.md "Wire frames"): the
// bytes come from a server, which the client does not trust.
//
// Input: byte 0 picks how many digests were asked (0 to 4), then their 32
// bytes each, then one byte that seeds how the stream is cut into pieces,
// then the stream. The stream is parsed twice, in one piece and in pieces,
// and both must agree; every frame answers a digest asked, each at most
// once, with a payload within the maximum, and Finish() is OK only when
// every digest was answered.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "protocol/chunk_frames.h"

#define FUZZ_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      __builtin_fprintf(stderr, "chunk_frames_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

namespace {

using cairn::Bytes;
using cairn::ByteSpan;

// Small, so that lengths over it are easy to reach; the check is the same.
constexpr uint32_t kMaxPayload = 4096;

struct Frame {
  size_t index;
  uint8_t status;
  Bytes payload;
  bool operator==(const Frame&) const = default;
};

struct Outcome {
  std::vector<Frame> frames;
  cairn::StatusCode feed = cairn::StatusCode::kOk;
  cairn::StatusCode finish = cairn::StatusCode::kOk;
  std::vector<bool> answered;
  bool operator==(const Outcome&) const = default;
};

// `direct`: the bytes are written where Want() says and taken by Got(), as
// the client's transport does (decrypting into the reader's buffer); else
// copied in by Feed(). Both must give the same outcome.
Outcome Parse(const std::vector<cairn::crypto::Digest>& asked, ByteSpan stream, uint32_t seed,
              bool direct) {
  Outcome out;
  // Good chunks of even-numbered reads land in "reader buffers", as
  // ReadInto's do; the rest in the parser's own.
  std::vector<cairn::ReadBuffer> readers(asked.size());
  cairn::protocol::ChunkFrameParser parser(
      asked,
      [&](size_t index, uint8_t status, cairn::ReadBuffer& payload) {
        FUZZ_CHECK(index < asked.size());
        FUZZ_CHECK(payload.size() <= kMaxPayload);
        if (index % 2 == 0 && status == 0) FUZZ_CHECK(&payload == &readers[index]);
        out.frames.push_back({index, status, Bytes(payload.begin(), payload.end())});
      },
      [&](size_t index, uint8_t status) -> cairn::ReadBuffer* {
        FUZZ_CHECK(index < asked.size());
        return index % 2 == 0 && status == 0 ? &readers[index] : nullptr;
      },
      kMaxPayload);
  size_t off = 0;
  uint32_t x = seed * 2654435761u + 1;
  while (off < stream.size()) {
    size_t n = stream.size();
    if (seed != 0) {
      x ^= x << 13;
      x ^= x >> 17;
      x ^= x << 5;
      n = x % 50;  // empty pieces too
    }
    n = std::min(n, stream.size() - off);
    cairn::Status s;
    if (!direct) {
      s = parser.Feed(stream.subspan(off, n));
      off += n;
    } else {
      // As much of the piece as the parser wants where it wants it.
      cairn::MutableByteSpan want = parser.Want();
      if (want.empty() && n > 0) {
        s = parser.Feed(stream.subspan(off, n));  // the error Feed gives for bytes past the end
        off += n;
      } else {
        n = std::min(n, want.size());
        if (n > 0) std::memcpy(want.data(), stream.data() + off, n);
        s = parser.Got(n);
        off += n;
      }
    }
    if (!s.ok()) {
      FUZZ_CHECK(s.code() == cairn::StatusCode::kDataLoss);
      out.feed = s.code();
      // Failed for good.
      FUZZ_CHECK(parser.Feed(stream.subspan(off)).code() == s.code());
      break;
    }
  }
  cairn::Status fin = parser.Finish();
  out.finish = fin.code();
  FUZZ_CHECK(fin.ok() || fin.code() == cairn::StatusCode::kDataLoss ||
             fin.code() == cairn::StatusCode::kUnavailable);
  FUZZ_CHECK(parser.frames() == out.frames.size());
  FUZZ_CHECK(parser.frames() + parser.unanswered() == asked.size());
  size_t answered = 0;
  for (size_t i = 0; i < asked.size(); ++i) {
    out.answered.push_back(parser.answered(i));
    answered += parser.answered(i);
  }
  FUZZ_CHECK(answered == out.frames.size());
  if (fin.ok()) FUZZ_CHECK(answered == asked.size() && parser.at_boundary());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t k = data[0] % 5;
  if (size < 1 + 32 * k + 1) return 0;
  std::vector<cairn::crypto::Digest> asked(k);
  for (size_t i = 0; i < k; ++i) std::memcpy(asked[i].data(), data + 1 + 32 * i, 32);
  uint8_t seed = data[1 + 32 * k];
  ByteSpan stream(data + 2 + 32 * k, size - 2 - 32 * k);
  Outcome whole = Parse(asked, stream, 0, false);
  Outcome pieces = Parse(asked, stream, seed | 1u, false);
  Outcome direct = Parse(asked, stream, seed | 1u, true);
  FUZZ_CHECK(whole == pieces);
  FUZZ_CHECK(whole == direct);
  return 0;
}
