#include "remote/chunk_frames.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "format/coding.h"
#include "server/api.h"

namespace cairn::remote {
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
            [this](size_t i, uint8_t s, Bytes& p) {
              got.push_back({i, s, std::string(AsStringView(p))});
            },
            nullptr, max) {}
  std::vector<Got> got;
  ChunkFrameParser parser;
};

// The stream of three frames used by most tests.
Bytes ThreeFrames() {
  Bytes s;
  AppendFrame(&s, D(2), server::kFrameOk, "chunk two");
  AppendFrame(&s, D(1), server::kFrameNotFound, "");
  AppendFrame(&s, D(3), server::kFrameError, "read error: EIO");
  return s;
}

const std::vector<Got> kThreeFramesGot = {
    {1, server::kFrameOk, "chunk two"},
    {0, server::kFrameNotFound, ""},
    {2, server::kFrameError, "read error: EIO"},
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
  Bytes reader_buffer = {9, 9, 9};  // cleared before use
  std::vector<std::pair<size_t, Bytes*>> where;
  ChunkFrameParser parser(
      asked, [&](size_t i, uint8_t, Bytes& p) { where.emplace_back(i, &p); },
      [&](size_t i, uint8_t status) -> Bytes* {
        return i == 0 && status == server::kFrameOk ? &reader_buffer : nullptr;
      });
  Bytes s;
  AppendFrame(&s, D(1), server::kFrameOk, "abc");
  AppendFrame(&s, D(2), server::kFrameOk, "xyz");
  ASSERT_TRUE(parser.Feed(s).ok());
  ASSERT_EQ(where.size(), 2u);
  EXPECT_EQ(where[0].second, &reader_buffer);
  EXPECT_EQ(AsStringView(reader_buffer), "abc");
  EXPECT_NE(where[1].second, &reader_buffer);
}

TEST(ChunkFramesTest, DuplicateDigestsAreAnsweredAsOftenAsAsked) {
  Recorder r({D(5), D(5)});
  Bytes s;
  AppendFrame(&s, D(5), server::kFrameOk, "a");
  AppendFrame(&s, D(5), server::kFrameOk, "a");
  ASSERT_TRUE(r.parser.Feed(s).ok());
  EXPECT_EQ(r.got.size(), 2u);
  EXPECT_TRUE(r.parser.answered(0));
  EXPECT_TRUE(r.parser.answered(1));
  // A third answer is one too many.
  Bytes more;
  AppendFrame(&more, D(5), server::kFrameOk, "a");
  Status st = r.parser.Feed(more);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("not asked for"), std::string_view::npos) << st.ToString();
}

TEST(ChunkFramesTest, DigestNotAskedForIsDataLossAndSticks) {
  Recorder r({D(1)});
  Bytes s;
  AppendFrame(&s, D(7), server::kFrameOk, "x");
  Status st = r.parser.Feed(s);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find(crypto::DigestHex(D(7))), std::string_view::npos);
  EXPECT_TRUE(r.got.empty());
  // Failed for good, even for a good frame.
  Bytes good;
  AppendFrame(&good, D(1), server::kFrameOk, "x");
  EXPECT_EQ(r.parser.Feed(good).code(), StatusCode::kDataLoss);
  EXPECT_EQ(r.parser.Finish().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(r.parser.answered(0));
}

TEST(ChunkFramesTest, LengthOverTheMaximumIsDataLoss) {
  Recorder r({D(1), D(2)}, 100);
  Bytes s;
  AppendFrame(&s, D(1), server::kFrameOk, std::string(100, 'a'));  // at the maximum: fine
  AppendFrame(&s, D(2), server::kFrameOk, "", 101);
  Status st = r.parser.Feed(s);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("101 bytes"), std::string_view::npos) << st.ToString();
  EXPECT_EQ(r.got.size(), 1u);
  // The default maximum refuses a 4 GiB frame before allocating anything.
  Recorder big({D(1)});
  Bytes h;
  AppendFrame(&h, D(1), server::kFrameOk, "", UINT32_MAX - 1);
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
  AppendFrame(&s, D(1), server::kFrameOk, "x");
  s.push_back(0);
  ASSERT_TRUE(r.parser.Feed(s).ok());  // could be the start of a header…
  EXPECT_EQ(r.parser.Finish().code(), StatusCode::kDataLoss);  // …but the stream ended
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
  AppendFrame(&s, D(1), server::kFrameOk, "");
  EXPECT_EQ(r.parser.Feed(s).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn::remote
