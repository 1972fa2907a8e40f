#include "crypto/sha256.h"

#include <algorithm>
#include <cctype>

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::crypto {
namespace {

using test_util::CodeOf;

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(DigestHex(Sha256(ByteSpan())),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(DigestHex(Sha256(AsBytes("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(DigestHex(Sha256(AsBytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Bytes million_a(1000000, 'a');
  EXPECT_EQ(DigestHex(Sha256(million_a)),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, HasherEqualsOneShot) {
  Bytes data = test_util::RandomBytes(100000, 3);
  const Digest expected = Sha256(data);
  for (size_t piece : {1u, 63u, 64u, 65u, 4096u, 99999u, 100000u}) {
    Sha256Hasher h;
    for (size_t off = 0; off < data.size(); off += piece) {
      h.Update(ByteSpan(data.data() + off, std::min(piece, data.size() - off)));
    }
    EXPECT_EQ(h.Finish(), expected) << "piece " << piece;
  }
  Sha256Hasher empty;
  empty.Update(ByteSpan());
  EXPECT_EQ(empty.Finish(), Sha256(ByteSpan()));
}

TEST(Sha256Test, ParseDigestHexRoundTrips) {
  const Digest d = Sha256(AsBytes("abc"));
  auto parsed = ParseDigestHex(DigestHex(d));
  CAIRN_ASSERT_OK(parsed);
  EXPECT_EQ(*parsed, d);
  std::string upper = DigestHex(d);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  auto parsed_upper = ParseDigestHex(upper);
  CAIRN_ASSERT_OK(parsed_upper);
  EXPECT_EQ(*parsed_upper, d);
}

TEST(Sha256Test, ParseDigestHexRejectsBadInput) {
  std::string hex = DigestHex(Sha256(AsBytes("abc")));
  EXPECT_EQ(CodeOf(ParseDigestHex("")), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ParseDigestHex(hex.substr(0, 63))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ParseDigestHex(hex.substr(0, 62))), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ParseDigestHex(hex + "0")), StatusCode::kInvalidArgument);
  std::string bad = hex;
  bad[10] = 'x';
  auto r = ParseDigestHex(bad);
  EXPECT_EQ(CodeOf(r), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(bad), std::string_view::npos);
}

TEST(Sha256Test, DigestHashUsesLeadingBytes) {
  Digest a = Sha256(AsBytes("a"));
  Digest b = a;
  EXPECT_EQ(DigestHash{}(a), DigestHash{}(b));
  b[0] ^= 1;
  EXPECT_NE(DigestHash{}(a), DigestHash{}(b));
}

}  // namespace
}  // namespace cairn::crypto
