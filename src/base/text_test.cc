#include "base/text.h"

#include <gtest/gtest.h>

#include <string>

namespace cairn {
namespace {

TEST(TextTest, HexDigitValue) {
  EXPECT_EQ(HexDigitValue('0'), 0);
  EXPECT_EQ(HexDigitValue('9'), 9);
  EXPECT_EQ(HexDigitValue('a'), 10);
  EXPECT_EQ(HexDigitValue('F'), 15);
  EXPECT_EQ(HexDigitValue('g'), -1);
  EXPECT_EQ(HexDigitValue('%'), -1);
}

TEST(TextTest, AsciiLowerFoldsOnlyAsciiLetters) {
  EXPECT_EQ(AsciiLower("Content-Type"), "content-type");
  EXPECT_EQ(AsciiLower("HTTPS"), "https");
  EXPECT_EQ(AsciiLower("\xc3\x89-x_9"), "\xc3\x89-x_9");  // UTF-8 É kept as it is
}

TEST(TextTest, PercentEncodeKeepsUnreservedOnly) {
  EXPECT_EQ(PercentEncode("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(PercentEncode("a b/c?d=e&f%+\xff"), "a%20b%2Fc%3Fd%3De%26f%25%2B%FF");
  // AWS SigV4's rules: the same, '/' kept in a path.
  EXPECT_EQ(PercentEncode("a b+c/d=e&f"), "a%20b%2Bc%2Fd%3De%26f");
  EXPECT_EQ(PercentEncode("a b/c", /*keep_slash=*/true), "a%20b/c");
  EXPECT_EQ(PercentEncode("\xc3\xa9*"), "%C3%A9%2A");
}

TEST(TextTest, PercentDecodeRoundTripsAndRefusesBrokenEscapes) {
  const std::string all = "a b/c?d=e&f%+\xff\x01~";
  EXPECT_EQ(PercentDecode(PercentEncode(all)), all);
  EXPECT_EQ(PercentDecode("qu%65ry%2fx"), "query/x");
  EXPECT_EQ(PercentDecode("1+2"), "1+2");
  EXPECT_EQ(PercentDecode("1+2", /*plus_is_space=*/true), "1 2");
  EXPECT_EQ(PercentDecode(""), "");
  for (const char* bad : {"%", "%4", "x%4", "%zz", "%4g", "a%00b"}) {
    EXPECT_FALSE(PercentDecode(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace cairn
