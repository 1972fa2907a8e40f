#include "base/bytes.h"

#include <algorithm>
#include <array>
#include <cstring>

#include <gtest/gtest.h>

#include "base/read_buffer.h"
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

TEST(ReadBufferTest, ShrinkingAndGrowingBackKeepsTheMemoryAndTheBytes) {
  ReadBuffer b;
  b.Resize(1000);
  std::fill(b.begin(), b.end(), uint8_t{7});
  const uint8_t* memory = b.data();
  b.Resize(10);
  EXPECT_EQ(b.size(), 10u);
  b.Resize(1000);  // a size it held before: no allocation, no fill
  EXPECT_EQ(b.data(), memory);
  EXPECT_TRUE(std::all_of(b.begin(), b.end(), [](uint8_t x) { return x == 7; }));
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.span().size(), 0u);
}

TEST(ReadBufferTest, GrowingPastTheCapacityKeepsTheContent) {
  ReadBuffer b;
  b.Resize(3);
  b.data()[0] = 1;
  b.data()[1] = 2;
  b.data()[2] = 3;
  b.Resize(100000);
  EXPECT_GE(b.capacity(), 100000u);
  EXPECT_EQ(b.data()[0], 1);
  EXPECT_EQ(b.data()[2], 3);
  ByteSpan view = b;
  EXPECT_EQ(view.size(), 100000u);
}

// A stored 4 MiB chunk is 4 MiB and a header: its buffer must not be
// rounded up to a third huge page (6 MiB held for 4 MiB and a few bytes:
// every chunk the mount's cache held cost half as much again).
TEST(ReadBufferTest, AChunkAndItsHeaderTakeLittleMoreThanTheChunk) {
  ReadBuffer b;
  b.Resize((size_t{4} << 20) + 64);
  EXPECT_LE(b.capacity(), (size_t{4} << 20) + (size_t{4} << 20) / 8 + 4096);
  std::memset(b.data(), 7, b.size());  // every byte writable
  EXPECT_EQ(b.data()[b.size() - 1], 7);
}

TEST(ReadBufferTest, AdoptAndReleaseMoveTheStorage) {
  ReadBuffer b;
  Bytes data = {1, 2, 3, 4};
  const uint8_t* memory = data.data();
  b.Adopt(std::move(data));
  EXPECT_EQ(b.size(), 4u);
  EXPECT_EQ(b.data(), memory);
  b.Resize(2);
  Bytes out = b.Release();
  EXPECT_EQ(out, (Bytes{1, 2}));
  EXPECT_EQ(out.data(), memory);
  EXPECT_TRUE(b.empty());
  b.Resize(5);  // usable again after a release
  EXPECT_EQ(b.size(), 5u);
}

}  // namespace cairn
