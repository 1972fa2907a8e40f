// Fuzz target for the client's reader of response bodies (net/http_body.h:
// BufferedReader, BodyReader): the bytes come from a server, which the
// client does not trust.
//
// Input: byte 0 picks the mode (length, chunked, until close) and the size
// of each read; byte 1 how the stream is cut into pieces; bytes 2-5 the
// Content-Length (little endian); then the stream. Invariants: no crash;
// a length-delimited body never yields more than its length; every error
// is DataLoss (garbage) or Unavailable (cut), never anything else; the
// body read in one piece and in pieces gives the same bytes and verdict.
#include <cstdio>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net/http_body.h"

#define FUZZ_CHECK(cond)                                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      __builtin_fprintf(stderr, "http_body_fuzz: invariant failed: %s\n", #cond);   \
      std::abort();                                                        \
    }                                                                      \
  } while (0)

namespace {

class Source : public cairn::net::PlainSource {
 public:
  Source(const uint8_t* data, size_t size, size_t piece) : data_(data), size_(size), piece_(piece) {}
  cairn::Status ReadSome(uint8_t* dest, size_t n, size_t* got) override {
    *got = std::min({n, piece_, size_ - at_});
    if (*got > 0) std::memcpy(dest, data_ + at_, *got);
    at_ += *got;
    return cairn::Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t piece_;
  size_t at_ = 0;
};

struct Outcome {
  std::string body;
  cairn::StatusCode code = cairn::StatusCode::kOk;
};

Outcome Run(const uint8_t* data, size_t size, size_t piece, cairn::net::BodyReader::Mode mode,
            uint64_t length, size_t step) {
  Source src(data, size, piece);
  cairn::net::BufferedReader in(&src);
  cairn::net::BodyReader body;
  body.Start(mode, length);
  Outcome out;
  std::vector<uint8_t> buf(step);
  for (;;) {
    size_t got = 0;
    cairn::Status s = body.Read(in, buf.data(), buf.size(), &got);
    if (!s.ok()) {
      out.code = s.code();
      return out;
    }
    if (got == 0) return out;
    FUZZ_CHECK(got <= buf.size());
    out.body.append(reinterpret_cast<const char*>(buf.data()), got);
    FUZZ_CHECK(out.body.size() <= (1u << 24));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 6) return 0;
  using Mode = cairn::net::BodyReader::Mode;
  const Mode modes[] = {Mode::kLength, Mode::kChunked, Mode::kUntilClose};
  const Mode mode = modes[data[0] % 3];
  const size_t steps[] = {1, 7, 4096, 1 << 16};
  const size_t step = steps[(data[0] / 3) % 4];
  const size_t piece = 1 + data[1] % 17;
  uint64_t length = 0;
  for (int i = 0; i < 4; ++i) length |= static_cast<uint64_t>(data[2 + i]) << (8 * i);
  length %= 1 << 16;
  data += 6;
  size -= 6;
  Outcome whole = Run(data, size, size + 1, mode, length, step);
  Outcome cut = Run(data, size, piece, mode, length, step);
  for (const Outcome* o : {&whole, &cut}) {
    FUZZ_CHECK(o->code == cairn::StatusCode::kOk || o->code == cairn::StatusCode::kDataLoss ||
               o->code == cairn::StatusCode::kUnavailable);
    if (mode == Mode::kLength) FUZZ_CHECK(o->body.size() <= length);
  }
  FUZZ_CHECK(whole.code == cut.code);
  if (whole.code == cairn::StatusCode::kOk) FUZZ_CHECK(whole.body == cut.body);
  return 0;
}
