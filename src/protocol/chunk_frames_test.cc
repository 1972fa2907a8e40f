#include "protocol/chunk_frames.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "format/coding.h"

namespace cairn::protocol {
namespace {

crypto::Digest D(uint8_t b) {
  crypto::Digest d;
  d.fill(b);
  return d;
}

void AppendFrame(Bytes* out, const crypto::Digest& id, uint8_t status, std::string_view payload,
                 uint32_t length_field = UINT32_MAX) {
  out->insert(out->end(), id.begin(), id.end());
  out->push_back(status);
  uint8_t len[4];
  format::PutU32(len, length_field == UINT32_MAX ? static_cast<uint32_t>(payload.size())
                                                 : length_field);
  out->insert(out->end(), len, len + 4);
  out->insert(out->end(), payload.begin(), payload.end());
}

struct Got {
  size_t index;
  uint8_t status;
  std::string payload;
  bool operator==(const Got&) const = default;
};

// A parser that records every frame.
struct Recorder {
  explicit Recorder(const std::vector<crypto::Digest>& asked, uint32_t max = kMaxChunkFramePayload)
      : parser(
            asked,
            [this](size_t i, uint8_t s, ReadBuffer& p) {
              got.push_back({i, s, std::string(AsStringView(p.span()))});
            },
            nullptr, max) {}
  std::vector<Got> got;
  ChunkFrameParser parser;
};

// The stream of three frames used by most tests.
Bytes ThreeFrames() {
  Bytes s;
  AppendFrame(&s, D(2), kFrameOk, "chunk two");
  AppendFrame(&s, D(1), kFrameNotFound, "");
  AppendFrame(&s, D(3), kFrameError, "read error: EIO");
  return s;
}

const std::vector<Got> kThreeFramesGot = {
    {1, kFrameOk, "chunk two"},
    {0, kFrameNotFound, ""},
    {2, kFrameError, "read error: EIO"},
};

TEST(ChunkFramesTest, WholeStreamInOnePiece) {
  Recorder r({D(1), D(2), D(3)});
  ASSERT_TRUE(r.parser.Feed(ThreeFrames()).ok());
  EXPECT_EQ(r.got, kThreeFramesGot);
  EXPECT_TRUE(r.parser.Finish().ok());
  EXPECT_EQ(r.parser.frames(), 3u);
  EXPECT_EQ(r.parser.unanswered(), 0u);
  EXPECT_TRUE(r.parser.at_boundary());
}

TEST(ChunkFramesTest, AnySplitGivesTheSameFrames) {
  Bytes stream = ThreeFrames();
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    Recorder r({D(1), D(2), D(3)});
    for (size_t off = 0; off < stream.size(); off += piece) {
      size_t n = std::min(piece, stream.size() - off);
      ASSERT_TRUE(r.parser.Feed(ByteSpan(stream).subspan(off, n)).ok()) << piece;
    }
    EXPECT_EQ(r.got, kThreeFramesGot) << "pieces of " << piece;
    EXPECT_TRUE(r.parser.Finish().ok());
  }
  // Two split points anywhere, empty pieces included.
  for (size_t a = 0; a <= stream.size(); ++a) {
    for (size_t b = a; b <= stream.size(); b += 3) {
      Recorder r({D(1), D(2), D(3)});
      ByteSpan all(stream);
      ASSERT_TRUE(r.parser.Feed(all.subspan(0, a)).ok());
      ASSERT_TRUE(r.parser.Feed(all.subspan(a, b - a)).ok());
      ASSERT_TRUE(r.parser.Feed(all.subspan(b)).ok());
      EXPECT_EQ(r.got, kThreeFramesGot) << a << " " << b;
    }
  }
}

TEST(ChunkFramesTest, OkPayloadGoesToTheCallersBuffer) {
  std::vector<crypto::Digest> asked = {D(1), D(2)};
  ReadBuffer reader_buffer;  // its content is replaced
  reader_buffer.Resize(3);
  std::vector<std::pair<size_t, ReadBuffer*>> where;
  ChunkFrameParser parser(
      asked, [&](size_t i, uint8_t, ReadBuffer& p) { where.emplace_back(i, &p); },
      [&](size_t i, uint8_t status) -> ReadBuffer* {
        return i == 0 && status == kFrameOk ? &reader_buffer : nullptr;
      });
  Bytes s;
  AppendFrame(&s, D(1), kFrameOk, "abc");
  AppendFrame(&s, D(2), kFrameOk, "xyz");
  ASSERT_TRUE(parser.Feed(s).ok());
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where[0].second, &reader_buffer);
  EXPECT_EQ(AsStringView(reader_buffer.span()), "abc");
  EXPECT_NE(where[1].second, &reader_buffer);
}

// Want() hands out the memory a payload goes to: the caller's buffer itself,
// so a transport can decrypt into it with no copy in between.
TEST(ChunkFramesTest, WantIsTheCallersMemory) {
  std::vector<crypto::Digest> asked = {D(1)};
  ReadBuffer reader_buffer;
  bool done = false;
  ChunkFrameParser parser(
      asked, [&](size_t, uint8_t, ReadBuffer& p) { done = &p == &reader_buffer; },
      [&](size_t, uint8_t) -> ReadBuffer* { return &reader_buffer; });
  Bytes s;
  AppendFrame(&s, D(1), kFrameOk, "payload");
  // The header, in two pieces.
  MutableByteSpan want = parser.Want();
  ASSERT_EQ(want.size(), kFrameHeaderSize);
  std::memcpy(want.data(), s.data(), 10);
  ASSERT_TRUE(parser.Got(10).ok());
  want = parser.Want();
  ASSERT_EQ(want.size(), kFrameHeaderSize - 10);
  std::memcpy(want.data(), s.data() + 10, want.size());
  ASSERT_TRUE(parser.Got(want.size()).ok());
  // The payload: straight into the reader's buffer.
  want = parser.Want();
  ASSERT_EQ(want.size(), 7u);
  EXPECT_EQ(want.data(), reader_buffer.data());
  std::memcpy(want.data(), s.data() + kFrameHeaderSize, 7);
  ASSERT_TRUE(parser.Got(7).ok());
  EXPECT_TRUE(done);
  EXPECT_EQ(AsStringView(reader_buffer.span()), "payload");
  EXPECT_TRUE(parser.Want().empty());  // nothing more expected
  EXPECT_TRUE(parser.Finish().ok());
}

TEST(ChunkFramesTest, DuplicateDigestsAreAnsweredAsOftenAsAsked) {
  Recorder r({D(5), D(5)});
  Bytes s;
  AppendFrame(&s, D(5), kFrameOk, "a");
  AppendFrame(&s, D(5), kFrameOk, "a");
  ASSERT_TRUE(r.parser.Feed(s).ok());
  EXPECT_EQ(r.got.size(), 2u);
  EXPECT_TRUE(r.parser.answered(0));
  EXPECT_TRUE(r.parser.answered(1));
  // A third answer is one too many.
  Bytes more;
  AppendFrame(&more, D(5), kFrameOk, "a");
  Status st = r.parser.Feed(more);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("after the last frame"), std::string_view::npos) << st.ToString();
}

TEST(ChunkFramesTest, DigestNotAskedForIsDataLossAndSticks) {
  Recorder r({D(1)});
  Bytes s;
  AppendFrame(&s, D(7), kFrameOk, "x");
  Status st = r.parser.Feed(s);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(crypto::DigestHex(D(7))), std::string_view::npos);
  EXPECT_TRUE(r.got.empty());
  // Failed for good, even for a good frame.
  Bytes good;
  AppendFrame(&good, D(1), kFrameOk, "x");
  EXPECT_EQ(r.parser.Feed(good).code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.parser.Finish().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(r.parser.answered(0));
}

TEST(ChunkFramesTest, LengthOverTheMaximumIsDataLoss) {
  Recorder r({D(1), D(2)}, 100);
  Bytes s;
  AppendFrame(&s, D(1), kFrameOk, std::string(100, 'a'));  // at the maximum: fine
  AppendFrame(&s, D(2), kFrameOk, "", 101);
  Status st = r.parser.Feed(s);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("101 bytes"), std::string_view::npos) << st.ToString();
  EXPECT_EQ(r.got.size(), 1u);
  // The default maximum refuses a 4 GiB frame before allocating anything.
  Recorder big({D(1)});
  Bytes h;
  AppendFrame(&h, D(1), kFrameOk, "", UINT32_MAX - 1);
  EXPECT_EQ(big.parser.Feed(h).code(), StatusCode::kDataLoss);
}

TEST(ChunkFramesTest, TruncatedStreamsLeaveDigestsUnanswered) {
  Bytes stream = ThreeFrames();
  // Cut everywhere: never an error while feeding, Finish says what is missing.
  for (size_t cut = 0; cut < stream.size(); ++cut) {
    Recorder r({D(1), D(2), D(3)});
    ASSERT_TRUE(r.parser.Feed(ByteSpan(stream).subspan(0, cut)).ok());
    Status st = r.parser.Finish();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << cut;
    EXPECT_GT(r.parser.unanswered(), 0u);
    EXPECT_NE(st.message().find("unsent"), std::string_view::npos) << st.ToString();
  }
  Recorder r({D(1), D(2), D(3)});
  ASSERT_TRUE(r.parser.Feed(ByteSpan(stream).subspan(0, 37 + 4)).ok());  // into the payload
  Status st = r.parser.Finish();
  EXPECT_NE(st.message().find("4 of 9 bytes"), std::string_view::npos) << st.ToString();
  EXPECT_FALSE(r.parser.answered(1));
  EXPECT_FALSE(r.parser.at_boundary());
}

TEST(ChunkFramesTest, BytesAfterTheLastFrame) {
  Recorder r({D(1)});
  Bytes s;
  AppendFrame(&s, D(1), kFrameOk, "x");
  s.push_back(0);
  // Every digest asked was answered: nothing may follow.
  EXPECT_EQ(r.parser.Feed(s).code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.parser.Finish().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(r.parser.answered(0));
}

TEST(ChunkFramesTest, UnknownStatusIsPassedOn) {
  Recorder r({D(1)});
  Bytes s;
  AppendFrame(&s, D(1), 200, "who knows");
  ASSERT_TRUE(r.parser.Feed(s).ok());
  ASSERT_EQ(r.got.size(), 1u);
  EXPECT_EQ(r.got[0].status, 200);
}

TEST(ChunkFramesTest, EmptyAnswerToNothingAsked) {
  Recorder r({});
  EXPECT_TRUE(r.parser.Feed({}).ok());
  EXPECT_TRUE(r.parser.Finish().ok());
  Bytes s;
  AppendFrame(&s, D(1), kFrameOk, "");
  EXPECT_EQ(r.parser.Feed(s).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn::protocol
