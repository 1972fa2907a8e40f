#include "crypto/crypt_config.h"

#include <set>

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::crypto {
namespace {

using test_util::CodeOf;

Key256 KeyOf(uint8_t fill) {
  Key256 k;
  k.fill(fill);
  return k;
}

TEST(CryptConfigTest, SubkeysAndFingerprintDependOnTheMasterKeyOnly) {
  auto a = CryptConfig::FromMasterKey(KeyOf(1));
  auto a2 = CryptConfig::FromMasterKey(KeyOf(1));
  auto b = CryptConfig::FromMasterKey(KeyOf(2));
  EXPECT_EQ(a->fingerprint(), a2->fingerprint());
  EXPECT_NE(a->fingerprint(), b->fingerprint());
  EXPECT_EQ(a->FingerprintText().size(), 8 * 3 - 1);
  EXPECT_EQ(a->FingerprintText(), FingerprintText(a->fingerprint()));
  // The fingerprint is not the master key, nor any derived key in use.
  Bytes data = test_util::RandomBytes(1000, 3);
  EXPECT_NE(a->ChunkId(data), a->Mac(data));
}

TEST(CryptConfigTest, HkdfExpandOfOneBlockIsHmacOfInfoAndCounter) {
  // RFC 5869 defines T(1) = HMAC(PRK, info || 0x01); the fingerprint is that
  // for info "cairn v1 fingerprint" (docs/FORMAT.md, "Encryption").
  Key256 master = KeyOf(7);
  std::string info = "cairn v1 fingerprint";
  Bytes input(info.begin(), info.end());
  input.push_back(1);
  EXPECT_EQ(CryptConfig::FromMasterKey(master)->fingerprint(), HmacSha256(master, input));
}

TEST(CryptConfigTest, ChunkIdsAreKeyedAndNotSha256) {
  auto a = CryptConfig::FromMasterKey(KeyOf(1));
  auto b = CryptConfig::FromMasterKey(KeyOf(2));
  Bytes data = test_util::RandomBytes(4096, 1);
  EXPECT_EQ(a->ChunkId(data), a->ChunkId(data));
  EXPECT_NE(a->ChunkId(data), b->ChunkId(data));
  EXPECT_NE(a->ChunkId(data), Sha256(data));
}

TEST(CryptConfigTest, ZeroChunkIdIsTheIdOfZeros) {
  auto a = CryptConfig::FromMasterKey(KeyOf(1));
  for (uint32_t len : {1u, 4096u, 4u << 20}) {
    EXPECT_EQ(a->ZeroChunkId(len), a->ChunkId(Bytes(len, 0))) << len;
  }
}

TEST(CryptConfigTest, EncryptDecryptRoundTripInPlaceAndApart) {
  auto c = CryptConfig::FromMasterKey(KeyOf(9));
  Bytes aad = test_util::RandomBytes(28, 4);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{100000}}) {
    Bytes plain = test_util::RandomBytes(n, n);
    Bytes ct(n);
    std::array<uint8_t, kGcmNonceSize> nonce;
    std::array<uint8_t, kGcmTagSize> tag;
    c->Encrypt(aad, plain, ct.data(), nonce, tag);
    if (n >= 16) {
      EXPECT_NE(ct, plain);
    }
    Bytes back(n);
    CAIRN_ASSERT_OK(c->Decrypt(aad, ct, nonce, tag, back.data()));
    EXPECT_EQ(back, plain);
    // In place.
    Bytes buf = plain;
    c->Encrypt(aad, buf, buf.data(), nonce, tag);
    CAIRN_ASSERT_OK(c->Decrypt(aad, buf, nonce, tag, buf.data()));
    EXPECT_EQ(buf, plain);
  }
}

TEST(CryptConfigTest, AnyChangeFailsAuthentication) {
  auto c = CryptConfig::FromMasterKey(KeyOf(9));
  auto other = CryptConfig::FromMasterKey(KeyOf(10));
  Bytes aad = test_util::RandomBytes(28, 4);
  Bytes plain = test_util::RandomBytes(1000, 5);
  Bytes ct(plain.size());
  std::array<uint8_t, kGcmNonceSize> nonce;
  std::array<uint8_t, kGcmTagSize> tag;
  c->Encrypt(aad, plain, ct.data(), nonce, tag);
  Bytes out(plain.size());
  auto fails = [&](const Bytes& a, const Bytes& x, auto n, auto t, const CryptConfig& key) {
    return CodeOf(key.Decrypt(a, x, n, t, out.data())) == StatusCode::kDataLoss;
  };
  Bytes bad_ct = ct;
  bad_ct[500] ^= 1;
  EXPECT_TRUE(fails(aad, bad_ct, nonce, tag, *c));
  Bytes bad_aad = aad;
  bad_aad[0] ^= 0x80;
  EXPECT_TRUE(fails(bad_aad, ct, nonce, tag, *c));
  auto bad_nonce = nonce;
  bad_nonce[11] ^= 1;
  EXPECT_TRUE(fails(aad, ct, bad_nonce, tag, *c));
  auto bad_tag = tag;
  bad_tag[0] ^= 1;
  EXPECT_TRUE(fails(aad, ct, nonce, bad_tag, *c));
  EXPECT_TRUE(fails(aad, ct, nonce, tag, *other));
  Bytes shorter(ct.begin(), ct.end() - 1);
  EXPECT_TRUE(fails(aad, shorter, nonce, tag, *c));
}

TEST(CryptConfigTest, NoncesAreFresh) {
  auto c = CryptConfig::FromMasterKey(KeyOf(9));
  std::set<std::array<uint8_t, kGcmNonceSize>> seen;
  Bytes plain(64, 0);
  Bytes ct(64);
  for (int i = 0; i < 1000; ++i) {
    std::array<uint8_t, kGcmNonceSize> nonce;
    std::array<uint8_t, kGcmTagSize> tag;
    c->Encrypt({}, plain, ct.data(), nonce, tag);
    EXPECT_TRUE(seen.insert(nonce).second);
  }
}

TEST(CryptConfigTest, ConstantTimeEqual) {
  Bytes a = {1, 2, 3};
  Bytes b = {1, 2, 3};
  Bytes c = {1, 2, 4};
  EXPECT_TRUE(ConstantTimeEqual(a, b));
  EXPECT_FALSE(ConstantTimeEqual(a, c));
  EXPECT_FALSE(ConstantTimeEqual(a, ByteSpan(b).first(2)));
}

}  // namespace
}  // namespace cairn::crypto
