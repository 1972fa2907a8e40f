#include "base/bytes.h"

#include <array>

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn {
namespace {

TEST(BytesTest, ToHexIsLowerCase) {
  const uint8_t data[] = {0x00, 0x01, 0x7f, 0xab, 0xff};
  EXPECT_EQ(ToHex(data), "00017fabff");
  EXPECT_EQ(ToHex(ByteSpan()), "");
}

TEST(BytesTest, HexRoundTripsEveryLength) {
  for (size_t n = 0; n < 80; ++n) {
    Bytes data = test_util::RandomBytes(n, n);
    std::string hex = ToHex(data);
    ASSERT_EQ(hex.size(), 2 * n);
    Bytes back(n, 0xEE);
    ASSERT_TRUE(FromHex(hex, back)) << hex;
    EXPECT_EQ(back, data);
  }
}

TEST(BytesTest, FromHexAcceptsUpperCase) {
  std::array<uint8_t, 3> out{};
  ASSERT_TRUE(FromHex("ABcDeF", out));
  EXPECT_EQ(out, (std::array<uint8_t, 3>{0xab, 0xcd, 0xef}));
}

TEST(BytesTest, FromHexRejectsBadInput) {
  std::array<uint8_t, 2> out{};
  EXPECT_FALSE(FromHex("", out));
  EXPECT_FALSE(FromHex("abc", out));     // odd and short
  EXPECT_FALSE(FromHex("abcdef", out));  // too long
  EXPECT_FALSE(FromHex("ab", out));      // too short
  EXPECT_FALSE(FromHex("abcg", out));
  EXPECT_FALSE(FromHex("ab c", out));
  EXPECT_FALSE(FromHex("-1ab", out));
  EXPECT_FALSE(FromHex("0x12", out));
  EXPECT_FALSE(FromHex(std::string_view("ab\0d", 4), out));
  EXPECT_TRUE(FromHex("0a0B", out));
  std::array<uint8_t, 0> none{};
  EXPECT_TRUE(FromHex("", none));
}

TEST(BytesTest, IsAllZeroOnEverySizeAndOffset) {
  Bytes buf(300 + 8, 0);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t size = 0; size <= 300; ++size) {
      ByteSpan span(buf.data() + offset, size);
      ASSERT_TRUE(IsAllZero(span)) << "offset " << offset << " size " << size;
      // A single non-zero byte anywhere inside the span is seen...
      for (size_t i = 0; i < size; ++i) {
        buf[offset + i] = 0x80;
        ASSERT_FALSE(IsAllZero(span)) << "offset " << offset << " size " << size << " at " << i;
        buf[offset + i] = 0;
      }
      // ...and bytes just outside it are not.
      if (offset > 0) buf[offset - 1] = 1;
      buf[offset + size] = 1;
      ASSERT_TRUE(IsAllZero(span)) << "offset " << offset << " size " << size;
      if (offset > 0) buf[offset - 1] = 0;
      buf[offset + size] = 0;
    }
  }
}

TEST(BytesTest, IsAllZeroOnLargeBuffer) {
  Bytes buf(4 << 20, 0);
  EXPECT_TRUE(IsAllZero(buf));
  buf.back() = 1;
  EXPECT_FALSE(IsAllZero(buf));
  buf.back() = 0;
  buf[2 << 20] = 1;
  EXPECT_FALSE(IsAllZero(buf));
}

TEST(BytesTest, StringViewConversions) {
  std::string s = "cairn";
  EXPECT_EQ(AsStringView(AsBytes(s)), "cairn");
  EXPECT_EQ(AsBytes(s).size(), 5u);
  EXPECT_EQ(AsBytes(s)[0], 'c');
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(ParseByteSizeTest, UnitsAndErrors) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("256M"), uint64_t{256} << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), uint64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("1.5g"), uint64_t{3} << 29);
  EXPECT_EQ(*ParseByteSize("64k"), uint64_t{64} << 10);
  for (const char* bad : {"", "M", "-1M", "12X", "lots", "1e30T"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(HumanBytesTest, UnitsAndDecimals) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(HumanBytes(uint64_t{1} << 30, 1), "1.0 GiB");
}

}  // namespace
}  // namespace cairn
