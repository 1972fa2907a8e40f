#include "format/coding.h"

#include <gtest/gtest.h>

namespace cairn::format {
namespace {

TEST(CodingTest, PutsLittleEndian) {
  uint8_t b[8] = {};
  PutU16(b, 0x0102);
  EXPECT_EQ(b[0], 0x02);
  EXPECT_EQ(b[1], 0x01);
  PutU32(b, 0x01020304);
  EXPECT_EQ(b[0], 0x04);
  EXPECT_EQ(b[3], 0x01);
  PutU64(b, 0x0102030405060708);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(b[i], 8 - i) << i;
}

TEST(CodingTest, RoundTripsExtremes) {
  uint8_t b[8];
  for (uint16_t v : {uint16_t{0}, uint16_t{1}, uint16_t{0x8000}, uint16_t{0xffff}}) {
    PutU16(b, v);
    EXPECT_EQ(GetU16(b), v);
  }
  for (uint32_t v : {0u, 1u, 0x80000000u, 0xffffffffu, 0xdeadbeefu}) {
    PutU32(b, v);
    EXPECT_EQ(GetU32(b), v);
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{1} << 63, ~uint64_t{0},
                     uint64_t{0x0123456789abcdef}}) {
    PutU64(b, v);
    EXPECT_EQ(GetU64(b), v);
  }
}

TEST(CodingTest, GetsFromBytes) {
  const uint8_t b[8] = {0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01};
  EXPECT_EQ(GetU16(b), 0xcdefu);
  EXPECT_EQ(GetU32(b), 0x89abcdefu);
  EXPECT_EQ(GetU64(b), 0x0123456789abcdefu);
}

}  // namespace
}  // namespace cairn::format
