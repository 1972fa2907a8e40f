#include "crypto/key_file.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/unit_test_util.h"

namespace cairn::crypto {
namespace {

using test_util::CodeOf;
using Json = nlohmann::ordered_json;

constexpr int64_t kCreated = 1767225600;  // 2026-01-01T00:00:00Z

Key256 TestKey(uint8_t seed) {
  Key256 k;
  for (size_t i = 0; i < k.size(); ++i) k[i] = static_cast<uint8_t>(seed * 31 + i);
  return k;
}

// Small parameters: the unit tests unwrap many times.
KdfParams Small(Kdf kdf) {
  KdfParams p = WeakKdfParams(kdf);
  p.scrypt_n = 256;
  return p;
}

std::string Wrap(const Key256& key, std::string_view pass, Kdf kdf = Kdf::kScrypt) {
  auto text = WrapKeyWith(key, pass, Small(kdf), kCreated);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

// The key file with one member replaced by `value` ("kdf.salt" for nested).
std::string With(const std::string& text, const std::string& member, const Json& value) {
  Json j = Json::parse(text);
  if (auto dot = member.find('.'); dot != std::string::npos) {
    j[member.substr(0, dot)][member.substr(dot + 1)] = value;
  } else {
    j[member] = value;
  }
  return j.dump();
}

std::string Without(const std::string& text, const std::string& member) {
  Json j = Json::parse(text);
  if (auto dot = member.find('.'); dot != std::string::npos) {
    j[member.substr(0, dot)].erase(member.substr(dot + 1));
  } else {
    j.erase(member);
  }
  return j.dump();
}

// `hex` with its character at `pos` changed to another hex digit.
std::string FlipHexDigit(std::string hex, size_t pos) {
  hex[pos] = hex[pos] == '0' ? '1' : '0';
  return hex;
}

class KeyFileKdfTest : public ::testing::TestWithParam<Kdf> {};

TEST_P(KeyFileKdfTest, RoundTrips) {
  const Key256 key = TestKey(1);
  const std::string text = Wrap(key, "correct horse", GetParam());
  auto back = UnwrapKey(text, "correct horse");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, key);

  auto info = ParseKeyFile(text);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->kdf, GetParam());
  EXPECT_EQ(info->created_unix, kCreated);
  EXPECT_EQ(info->fingerprint, CryptConfig::FromMasterKey(key)->fingerprint());
  EXPECT_EQ(info->kdf_params, Small(GetParam()).ToString());
  EXPECT_EQ(info->params.ToString(), Small(GetParam()).ToString());
}

TEST_P(KeyFileKdfTest, WrongPassphraseIsPermissionDenied) {
  const std::string text = Wrap(TestKey(2), "right", GetParam());
  for (std::string_view wrong : {"wrong", "righ", "right ", "", "Right"}) {
    auto back = UnwrapKey(text, wrong);
    EXPECT_EQ(CodeOf(back), StatusCode::kUnauthenticated) << wrong;
    EXPECT_NE(back.status().message().find("wrong passphrase"), std::string::npos)
        << back.status().ToString();
  }
}

TEST_P(KeyFileKdfTest, EachWrapUsesAFreshSaltAndNonce) {
  const Key256 key = TestKey(3);
  const std::string a = Wrap(key, "p", GetParam());
  const std::string b = Wrap(key, "p", GetParam());
  Json ja = Json::parse(a), jb = Json::parse(b);
  EXPECT_NE(ja["kdf"]["salt"], jb["kdf"]["salt"]);
  EXPECT_NE(ja["wrapped_key"], jb["wrapped_key"]);
  EXPECT_EQ(ja["fingerprint"], jb["fingerprint"]);
  EXPECT_EQ(*UnwrapKey(b, "p"), key);
}

INSTANTIATE_TEST_SUITE_P(BothKdfs, KeyFileKdfTest, ::testing::Values(Kdf::kScrypt, Kdf::kArgon2id),
                         [](const auto& info) { return std::string(KdfName(info.param)); });

TEST(KeyFileTest, DefaultParametersAreTheDocumentedOnes) {
  EXPECT_EQ(DefaultKdfParams(Kdf::kScrypt).ToString(), "N=65536 r=8 p=1");
  EXPECT_EQ(DefaultKdfParams(Kdf::kArgon2id).ToString(), "t=3 m=65536KiB p=1");
  CAIRN_EXPECT_OK(DefaultKdfParams(Kdf::kScrypt).Check());
  CAIRN_EXPECT_OK(DefaultKdfParams(Kdf::kArgon2id).Check());
  CAIRN_EXPECT_OK(WeakKdfParams(Kdf::kScrypt).Check());
  CAIRN_EXPECT_OK(WeakKdfParams(Kdf::kArgon2id).Check());
}

TEST(KeyFileTest, WrapKeyWithDefaultsRoundTrips) {
  // The real parameters once (64 MiB, a fraction of a second).
  const Key256 key = TestKey(4);
  auto text = WrapKey(key, "pw", Kdf::kScrypt, kCreated);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(ParseKeyFile(*text)->kdf_params, "N=65536 r=8 p=1");
  EXPECT_EQ(*UnwrapKey(*text, "pw"), key);
}

TEST(KeyFileTest, FileHasTheDocumentedShape) {
  const std::string text = Wrap(TestKey(5), "pw");
  Json j = Json::parse(text);
  EXPECT_EQ(j["format"], "cairn-key");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["created_unix"], kCreated);
  EXPECT_EQ(j["kdf"]["name"], "scrypt");
  EXPECT_EQ(j["kdf"]["n"], 256);
  EXPECT_EQ(j["kdf"]["r"], 8);
  EXPECT_EQ(j["kdf"]["p"], 1);
  EXPECT_EQ(j["kdf"]["salt"].get<std::string>().size(), 64u);
  EXPECT_EQ(j["wrapped_key"].get<std::string>().size(), 2 * (12 + 32 + 16u));
  EXPECT_EQ(j["fingerprint"], ToHex(CryptConfig::FromMasterKey(TestKey(5))->fingerprint()));
  EXPECT_EQ(j.begin().key(), "format");  // members in the documented order
}

TEST(KeyFileTest, FingerprintTextMatchesCryptConfig) {
  auto config = CryptConfig::FromMasterKey(TestKey(6));
  EXPECT_EQ(FingerprintText(config->fingerprint()), config->FingerprintText());
  auto info = ParseKeyFile(Wrap(TestKey(6), "pw"));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(FingerprintText(info->fingerprint), config->FingerprintText());
}

TEST(KeyFileTest, AnyTruncationIsAnErrorNotACrash) {
  const std::string text = Wrap(TestKey(7), "pw");
  for (size_t n = 0; n < text.size(); ++n) {
    const std::string cut = text.substr(0, n);
    // The file is pretty-printed and ends "}\n": only the newline may go.
    if (n == text.size() - 1) {
      EXPECT_TRUE(ParseKeyFile(cut).ok()) << n;
      continue;
    }
    auto info = ParseKeyFile(cut);
    EXPECT_EQ(CodeOf(info), StatusCode::kDataLoss) << n;
    EXPECT_NE(info.status().message().find("malformed key file"), std::string::npos)
        << info.status().ToString();
    EXPECT_EQ(CodeOf(UnwrapKey(cut, "pw")), StatusCode::kDataLoss) << n;
  }
}

TEST(KeyFileTest, TruncationSaysWhere) {
  const std::string text = Wrap(TestKey(7), "pw");
  auto info = ParseKeyFile(text.substr(0, 40));
  EXPECT_NE(info.status().message().find("unexpected end of input"), std::string::npos)
      << info.status().ToString();
}

TEST(KeyFileTest, GarbageIsAnErrorNotACrash) {
  for (const std::string& bad : std::vector<std::string>{
           "", "null", "[]", "42", "\"cairn-key\"", "{", "{}", "{\"format\":1}",
           std::string(1000, '['), std::string(3, '\0'), "\xff\xfe{}"}) {
    EXPECT_EQ(CodeOf(ParseKeyFile(bad)), StatusCode::kDataLoss) << bad;
    EXPECT_EQ(CodeOf(UnwrapKey(bad, "pw")), StatusCode::kDataLoss) << bad;
  }
  EXPECT_EQ(CodeOf(ParseKeyFile(std::string(kMaxKeyFileSize + 1, ' '))), StatusCode::kDataLoss);
}

TEST(KeyFileTest, MissingMembersAreNamed) {
  const std::string text = Wrap(TestKey(8), "pw");
  for (std::string member : {"format", "version", "created_unix", "kdf", "wrapped_key",
                             "fingerprint", "kdf.name", "kdf.n", "kdf.r", "kdf.p", "kdf.salt"}) {
    auto info = ParseKeyFile(Without(text, member));
    EXPECT_EQ(CodeOf(info), StatusCode::kDataLoss) << member;
    EXPECT_NE(info.status().message().find("\"" + member + "\""), std::string::npos)
        << member << ": " << info.status().ToString();
  }
}

TEST(KeyFileTest, WrongTypesAreDataLoss) {
  const std::string text = Wrap(TestKey(9), "pw");
  const std::vector<std::pair<std::string, Json>> cases = {
      {"format", "cairn-keys"}, {"format", 1},         {"version", 0},
      {"version", "1"},         {"version", -1},       {"version", 1.5},
      {"created_unix", -5},     {"created_unix", "x"}, {"kdf", "scrypt"},
      {"kdf.name", "pbkdf2"},   {"kdf.n", "65536"},    {"kdf.salt", 7},
      {"kdf.salt", "zz"},       {"wrapped_key", ""},   {"fingerprint", "00"},
  };
  for (const auto& [member, value] : cases) {
    auto info = ParseKeyFile(With(text, member, value));
    EXPECT_EQ(CodeOf(info), StatusCode::kDataLoss) << member << "=" << value.dump();
    EXPECT_EQ(CodeOf(UnwrapKey(With(text, member, value), "pw")), StatusCode::kDataLoss)
        << member << "=" << value.dump();
  }
}

TEST(KeyFileTest, NewerVersionIsUnimplemented) {
  auto info = ParseKeyFile(With(Wrap(TestKey(10), "pw"), "version", 2));
  EXPECT_EQ(CodeOf(info), StatusCode::kUnimplemented);
  EXPECT_NE(info.status().message().find("upgrade cairn"), std::string::npos);
}

TEST(KeyFileTest, KdfParametersOutOfBoundsAreRefusedBeforeAnyWork) {
  const std::string scrypt = Wrap(TestKey(11), "pw", Kdf::kScrypt);
  const std::string argon = Wrap(TestKey(11), "pw", Kdf::kArgon2id);
  const std::vector<std::pair<std::string, Json>> scrypt_cases = {
      {"kdf.n", 0},
      {"kdf.n", 1},
      {"kdf.n", 1000},               // not a power of two
      {"kdf.n", uint64_t{1} << 40},  // terabytes
      {"kdf.n", UINT64_MAX},
      {"kdf.n", uint64_t{1} << 22},  // 4 GiB with r=8
      {"kdf.r", 0},
      {"kdf.r", 33},
      {"kdf.r", uint64_t{1} << 40},
      {"kdf.p", 0},
      {"kdf.p", 17},
  };
  EXPECT_EQ(CodeOf(UnwrapKey(With(With(scrypt, "kdf.r", 1), "kdf.n", 1 << 16), "pw")),
            StatusCode::kDataLoss);  // OpenSSL's N < 2^(16·r)
  for (const auto& [member, value] : scrypt_cases) {
    auto r = UnwrapKey(With(scrypt, member, value), "pw");
    EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << member << "=" << value.dump();
    EXPECT_NE(r.status().message().find("kdf"), std::string::npos) << r.status().ToString();
  }
  const std::vector<std::pair<std::string, Json>> argon_cases = {
      {"kdf.t", 0},
      {"kdf.t", 17},
      {"kdf.m_kib", 4},
      {"kdf.m_kib", 1u << 30},
      {"kdf.m_kib", UINT32_MAX},
      {"kdf.p", 0},
      {"kdf.p", 1000},
      {"kdf.m_kib", uint64_t{1} << 33},
  };
  for (const auto& [member, value] : argon_cases) {
    auto r = UnwrapKey(With(argon, member, value), "pw");
    EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << member << "=" << value.dump();
  }
  KdfParams huge = Small(Kdf::kScrypt);
  huge.scrypt_n = uint64_t{1} << 30;
  EXPECT_EQ(CodeOf(WrapKeyWith(TestKey(11), "pw", huge, kCreated)), StatusCode::kInvalidArgument);
}

TEST(KeyFileTest, AlteredSaltOrCiphertextReadsAsWrongPassphrase) {
  const std::string text = Wrap(TestKey(12), "pw");
  Json j = Json::parse(text);
  const std::string salt = j["kdf"]["salt"], wrapped = j["wrapped_key"];
  for (size_t pos : {size_t{0}, size_t{31}, size_t{63}}) {
    EXPECT_EQ(CodeOf(UnwrapKey(With(text, "kdf.salt", FlipHexDigit(salt, pos)), "pw")),
              StatusCode::kUnauthenticated)
        << pos;
  }
  // Nonce, ciphertext and tag.
  for (size_t pos : {size_t{0}, size_t{23}, size_t{24}, size_t{87}, size_t{88}, size_t{119}}) {
    EXPECT_EQ(CodeOf(UnwrapKey(With(text, "wrapped_key", FlipHexDigit(wrapped, pos)), "pw")),
              StatusCode::kUnauthenticated)
        << pos;
  }
  // Other parameters derive another wrapping key.
  EXPECT_EQ(CodeOf(UnwrapKey(With(text, "kdf.n", 512), "pw")), StatusCode::kUnauthenticated);
  EXPECT_EQ(CodeOf(UnwrapKey(With(text, "kdf.r", 7), "pw")), StatusCode::kUnauthenticated);
}

TEST(KeyFileTest, AlteredFingerprintIsDataLoss) {
  const std::string text = Wrap(TestKey(13), "pw");
  const std::string fp = Json::parse(text)["fingerprint"];
  auto r = UnwrapKey(With(text, "fingerprint", FlipHexDigit(fp, 10)), "pw");
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("fingerprint"), std::string::npos) << r.status().ToString();
  // Another key's fingerprint, too.
  auto other = UnwrapKey(
      With(text, "fingerprint", Json::parse(Wrap(TestKey(14), "pw"))["fingerprint"]), "pw");
  EXPECT_EQ(CodeOf(other), StatusCode::kDataLoss);
}

TEST(KeyFileTest, CreationTimeAndUnknownMembersDoNotMatter) {
  const Key256 key = TestKey(15);
  const std::string text = Wrap(key, "pw");
  EXPECT_EQ(*UnwrapKey(With(text, "created_unix", 0), "pw"), key);
  EXPECT_EQ(*UnwrapKey(With(text, "comment", "laptop"), "pw"), key);
  EXPECT_EQ(ParseKeyFile(With(text, "created_unix", 12345))->created_unix, 12345);
}

TEST(KeyFileTest, ParseKdfNames) {
  EXPECT_EQ(*ParseKdf("scrypt"), Kdf::kScrypt);
  EXPECT_EQ(*ParseKdf("argon2id"), Kdf::kArgon2id);
  EXPECT_EQ(CodeOf(ParseKdf("argon2")), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ParseKdf("")), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::crypto
