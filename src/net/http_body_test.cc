// The client's reading of response bodies from plaintext (net/http_body.h):
// chunked and length-delimited bodies cut into any pieces, large reads
// straight into the caller's memory, and every malformed or cut stream an
// error of the right kind (DataLoss: the server sent garbage; Unavailable:
// the transfer was cut, worth retrying).
#include "net/http_body.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace cairn::net {
namespace {

// Plaintext from memory, at most `piece` bytes per ReadSome; counts calls.
class MemorySource : public PlainSource {
 public:
  MemorySource(std::string data, size_t piece) : data_(std::move(data)), piece_(piece) {}
  Status ReadSome(uint8_t* dest, size_t n, size_t* got) override {
    ++calls;
    largest_ask = std::max(largest_ask, n);
    *got = std::min({n, piece_, data_.size() - at_});
    std::memcpy(dest, data_.data() + at_, *got);
    at_ += *got;
    return Status::Ok();
  }
  int calls = 0;
  size_t largest_ask = 0;

 private:
  std::string data_;
  size_t piece_;
  size_t at_ = 0;
};

// Reads the whole body in reads of `step` bytes.
Result<std::string> ReadAll(BufferedReader& in, BodyReader& body, size_t step) {
  std::string out;
  std::vector<uint8_t> buf(step);
  for (;;) {
    size_t got = 0;
    CAIRN_RETURN_IF_ERROR(body.Read(in, buf.data(), buf.size(), &got));
    if (got == 0) return out;
    out.append(reinterpret_cast<const char*>(buf.data()), got);
  }
}

TEST(HttpBodyTest, ChunkedBodyInAnyPiecesAndWhatFollowsStaysBuffered) {
  const std::string stream = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
  for (size_t piece : {size_t{1}, size_t{3}, size_t{7}, stream.size()}) {
    for (size_t step : {size_t{1}, size_t{4}, size_t{64}}) {
      MemorySource src(stream, piece);
      BufferedReader in(&src);
      BodyReader body;
      body.Start(BodyReader::Mode::kChunked);
      auto got = ReadAll(in, body, step);
      ASSERT_TRUE(got.ok()) << got.status().ToString() << " piece " << piece << " step " << step;
      EXPECT_EQ(*got, "hello world");
      EXPECT_TRUE(body.done());
      std::string rest(4, '\0');
      size_t n = 0;
      ASSERT_TRUE(in.Read(reinterpret_cast<uint8_t*>(rest.data()), 4, &n).ok());
      EXPECT_EQ(rest.substr(0, n), std::string("NEXT").substr(0, n));
    }
  }
}

TEST(HttpBodyTest, ALargeReadGoesStraightIntoTheCallersMemory) {
  const std::string payload(1 << 20, 'x');
  MemorySource src(payload, payload.size());
  BufferedReader in(&src);
  BodyReader body;
  body.Start(BodyReader::Mode::kLength, payload.size());
  std::vector<uint8_t> dest(payload.size());
  ASSERT_TRUE(body.ReadExactly(in, dest.data(), dest.size(), "a chunk").ok());
  EXPECT_TRUE(body.done());
  // One read of the whole megabyte, not look-ahead-sized pieces.
  EXPECT_EQ(src.largest_ask, payload.size());
  EXPECT_LE(src.calls, 2);
}

TEST(HttpBodyTest, ACutStreamIsUnavailable) {
  {
    MemorySource src("abc", 64);
    BufferedReader in(&src);
    BodyReader body;
    body.Start(BodyReader::Mode::kLength, 10);
    auto got = ReadAll(in, body, 16);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  }
  {
    MemorySource src("a\r\n01234", 64);
    BufferedReader in(&src);
    BodyReader body;
    body.Start(BodyReader::Mode::kChunked);
    auto got = ReadAll(in, body, 16);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  }
}

TEST(HttpBodyTest, MalformedChunkedBodiesAreDataLoss) {
  std::vector<std::string> bad;
  bad.push_back("zz\r\nhello\r\n0\r\n\r\n");                // not hexadecimal
  bad.push_back("ffffffffffffffffffff\r\nx\r\n0\r\n\r\n");  // overflows 64 bits
  bad.push_back("5\r\nhelloXX\r\n0\r\n\r\n");               // chunk longer than its size
  bad.push_back("5\nhello\r\n0\r\n\r\n");                   // bare LF
  std::string long_line(BodyReader::kMaxChunkLine + 10, '1');  // endless size line
  long_line += "\r\n";
  bad.push_back(long_line);
  std::string trailers = "0\r\n";  // endless trailers
  trailers.append(BodyReader::kMaxTrailers + 10, 'a');
  trailers += "\r\n\r\n";
  bad.push_back(trailers);
  for (const std::string& stream : bad) {
    MemorySource src(stream, 5);
    BufferedReader in(&src);
    BodyReader body;
    body.Start(BodyReader::Mode::kChunked);
    auto got = ReadAll(in, body, 16);
    ASSERT_FALSE(got.ok()) << stream.substr(0, 40);
    EXPECT_EQ(got.status().code(), StatusCode::kDataLoss)
        << stream.substr(0, 40) << ": " << got.status().ToString();
  }
}

TEST(HttpBodyTest, HeaderBlockAndAClosedKeepAliveConnection) {
  MemorySource src("HTTP/1.1 200 OK\r\nA: b\r\n\r\nbody", 3);
  BufferedReader in(&src);
  std::string block;
  bool empty = true;
  ASSERT_TRUE(in.ReadHeaderBlock(&block, 1024, &empty).ok());
  EXPECT_FALSE(empty);
  EXPECT_EQ(block, "HTTP/1.1 200 OK\r\nA: b\r\n\r\n");

  MemorySource none("", 3);
  BufferedReader in2(&none);
  Status s = in2.ReadHeaderBlock(&block, 1024, &empty);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(empty);
}

}  // namespace
}  // namespace cairn::net
