#include "format/crc32c.h"

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::format {
namespace {

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c(ByteSpan()), 0u);
  EXPECT_EQ(Crc32c(AsBytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(AsBytes("a")), 0xC1D04330u);
  // RFC 3720 (iSCSI), appendix B.4.
  Bytes zeros(32, 0x00);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  Bytes ones(32, 0xFF);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  Bytes up(32);
  Bytes down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<uint8_t>(i);
    down[i] = static_cast<uint8_t>(31 - i);
  }
  EXPECT_EQ(Crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32cTest, PortableKnownVectors) {
  EXPECT_EQ(Crc32cExtendPortable(0, AsBytes("123456789")), 0xE3069283u);
  Bytes zeros(32, 0x00);
  EXPECT_EQ(Crc32cExtendPortable(0, zeros), 0x8A9136AAu);
}

TEST(Crc32cTest, HardwareAndPortableAgreeOnEveryLengthAndAlignment) {
  if (!Crc32cHardwareAvailable()) {
    GTEST_LOG_(INFO) << "no SSE4.2 on this CPU: both paths are the portable one";
  }
  Bytes data = test_util::RandomBytes(300 + 16, 7);
  for (size_t align = 0; align < 16; ++align) {
    for (size_t len = 0; len <= 300; ++len) {
      ByteSpan span(data.data() + align, len);
      ASSERT_EQ(Crc32cExtend(0, span), Crc32cExtendPortable(0, span))
          << "align " << align << " len " << len;
      ASSERT_EQ(Crc32cExtend(0xdeadbeef, span), Crc32cExtendPortable(0xdeadbeef, span))
          << "align " << align << " len " << len;
    }
  }
}

TEST(Crc32cTest, HardwareAndPortableAgreeOnLongInputs) {
  // Long inputs take the three-stripe path (blocks of 3 x 4096 bytes, then
  // the rest): lengths around its block boundaries, at every alignment mod 8.
  Bytes data = test_util::RandomBytes(5 * 12288 + 64, 11);
  for (size_t align = 0; align < 8; ++align) {
    for (size_t blocks = 0; blocks <= 4; ++blocks) {
      for (size_t len : {blocks * 12288 - 1, blocks * 12288, blocks * 12288 + 1,
                         blocks * 12288 + 4097, blocks * 12288 + 12287}) {
        if (len > data.size() - align) continue;
        ByteSpan span(data.data() + align, len);
        ASSERT_EQ(Crc32cExtend(0x12345678, span), Crc32cExtendPortable(0x12345678, span))
            << "align " << align << " len " << len;
      }
    }
  }
  Bytes big = test_util::RandomBytes(4 << 20, 12);
  EXPECT_EQ(Crc32c(big), Crc32cExtendPortable(0, big));
}

TEST(Crc32cTest, ExtendComposes) {
  Bytes data = test_util::RandomBytes(1000, 8);
  const uint32_t whole = Crc32c(data);
  for (size_t split = 0; split <= data.size(); split += 37) {
    ByteSpan a(data.data(), split);
    ByteSpan b(data.data() + split, data.size() - split);
    EXPECT_EQ(Crc32cExtend(Crc32c(a), b), whole) << "split " << split;
    EXPECT_EQ(Crc32cExtendPortable(Crc32cExtendPortable(0, a), b), whole) << "split " << split;
  }
  // Three pieces, and an empty piece changes nothing.
  uint32_t c = Crc32cExtend(0, ByteSpan(data.data(), 1));
  c = Crc32cExtend(c, ByteSpan());
  c = Crc32cExtend(c, ByteSpan(data.data() + 1, 500));
  c = Crc32cExtend(c, ByteSpan(data.data() + 501, 499));
  EXPECT_EQ(c, whole);
}

TEST(Crc32cTest, DetectsSingleBitFlips) {
  Bytes data = test_util::RandomBytes(64, 9);
  const uint32_t crc = Crc32c(data);
  for (size_t bit = 0; bit < data.size() * 8; ++bit) {
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    EXPECT_NE(Crc32c(data), crc) << "bit " << bit;
    data[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
}

}  // namespace
}  // namespace cairn::format
