// Tests of net/tls.h: self-signed certificates and fingerprints.

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "net/tls.h"
#include "tests/unit_test_util.h"

namespace cairn::net {
namespace {

using test_util::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool IsDisplayFingerprint(const std::string& fp) {
  if (fp.size() != 95) return false;
  for (size_t i = 0; i < fp.size(); ++i) {
    char c = fp[i];
    if (i % 3 == 2 ? c != ':' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

TEST(TlsTest, GeneratesSelfSignedCertificate) {
  TempDir dir;
  std::string cert = dir.Join("cert.pem"), key = dir.Join("key.pem");
  ASSERT_TRUE(GenerateSelfSigned(cert, key, {"backup.example.org", "10.1.2.3"}).ok());

  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(ReadAll(cert).find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(ReadAll(key).find("PRIVATE KEY"), std::string::npos);

  auto fp = CertificateFingerprint(cert);
  ASSERT_TRUE(fp.ok()) << fp.status().ToString();
  EXPECT_TRUE(IsDisplayFingerprint(*fp)) << *fp;
  EXPECT_EQ(*CertificateFingerprint(cert), *fp);

  // The names it is valid for, and the fingerprint from the DER encoding.
  FILE* f = ::fopen(cert.c_str(), "r");
  ASSERT_NE(f, nullptr);
  X509* x = PEM_read_X509(f, nullptr, nullptr, nullptr);
  ::fclose(f);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(X509_check_host(x, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(x, "backup.example.org", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(x, "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x, "::1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x, "10.1.2.3", 0), 1);
  EXPECT_NE(X509_check_host(x, "other.example.org", 0, 0, nullptr), 1);
  EXPECT_GT(ASN1_TIME_cmp_time_t(X509_get0_notAfter(x), ::time(nullptr) + 9L * 365 * 86400), 0);
  unsigned char* der = nullptr;
  int len = i2d_X509(x, &der);
  ASSERT_GT(len, 0);
  EXPECT_EQ(FingerprintOfDer(ByteSpan(der, static_cast<size_t>(len))), *fp);
  OPENSSL_free(der);
  X509_free(x);
}

TEST(TlsTest, NeverOverwrites) {
  TempDir dir;
  std::string cert = dir.Join("cert.pem"), key = dir.Join("key.pem");
  ASSERT_TRUE(GenerateSelfSigned(cert, key).ok());
  std::string before = ReadAll(cert);
  Status s = GenerateSelfSigned(cert, key);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  EXPECT_EQ(ReadAll(cert), before);
  // Only the certificate present: still refused, and no key left behind.
  std::string other_key = dir.Join("other.key");
  EXPECT_EQ(GenerateSelfSigned(cert, other_key).code(), StatusCode::kAlreadyExists);
  EXPECT_NE(::access(other_key.c_str(), F_OK), 0);
}

TEST(TlsTest, RejectsBadExtraName) {
  TempDir dir;
  Status s = GenerateSelfSigned(dir.Join("c"), dir.Join("k"), {"a,IP:1.2.3.4"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(::access(dir.Join("k").c_str(), F_OK), 0);
}

TEST(TlsTest, FingerprintOfDerIsSha256InDisplayForm) {
  // SHA-256("abc").
  EXPECT_EQ(FingerprintOfDer(AsBytes("abc")),
            "ba:78:16:bf:8f:01:cf:ea:41:41:40:de:5d:ae:22:23:b0:03:61:a3:96:17:7a:9c:b4:10:ff:61:"
            "f2:00:15:ad");
}

TEST(TlsTest, NormalizeFingerprint) {
  const std::string display =
      "ba:78:16:bf:8f:01:cf:ea:41:41:40:de:5d:ae:22:23:b0:03:61:a3:96:17:7a:9c:b4:10:ff:61:f2:00:"
      "15:ad";
  std::string bare;
  for (char c : display) {
    if (c != ':') bare += c;
  }
  std::string upper;
  for (char c : display) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(*NormalizeFingerprint(display), display);
  EXPECT_EQ(*NormalizeFingerprint(bare), display);
  EXPECT_EQ(*NormalizeFingerprint(upper), display);
  EXPECT_EQ(*NormalizeFingerprint(" " + bare + "\n"), display);

  for (std::string junk :
       {std::string(), std::string("xyz"), bare.substr(1), bare + "0", "g" + bare.substr(1),
        display.substr(0, 94) + "x", ":" + display.substr(1),
        display.substr(0, 2) + display.substr(3) + ":"}) {
    auto r = NormalizeFingerprint(junk);
    EXPECT_FALSE(r.ok()) << junk;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(TlsTest, EnsureCertificate) {
  TempDir dir;
  std::string cert = dir.Join("cert.pem"), key = dir.Join("key.pem");
  ASSERT_TRUE(EnsureCertificate(cert, key).ok());
  std::string fp = *CertificateFingerprint(cert);
  ASSERT_TRUE(EnsureCertificate(cert, key).ok());  // both there: kept
  EXPECT_EQ(*CertificateFingerprint(cert), fp);

  // Only one of the two.
  std::string lone_cert = dir.Join("lone.crt");
  ASSERT_EQ(::link(cert.c_str(), lone_cert.c_str()), 0);
  Status s = EnsureCertificate(lone_cert, dir.Join("missing.key"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.ToString().find("missing.key"), std::string::npos) << s.ToString();
  s = EnsureCertificate(dir.Join("missing.crt"), key);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.ToString().find("missing.crt"), std::string::npos) << s.ToString();

  // A key that is not the certificate's.
  std::string cert2 = dir.Join("cert2.pem"), key2 = dir.Join("key2.pem");
  ASSERT_TRUE(GenerateSelfSigned(cert2, key2).ok());
  EXPECT_NE(*CertificateFingerprint(cert2), fp);
  EXPECT_EQ(EnsureCertificate(cert, key2).code(), StatusCode::kFailedPrecondition);

  // Garbage in place of the certificate.
  test_util::WriteFileOrFail(dir.Join("bad.crt"), AsBytes("not a certificate\n"));
  EXPECT_FALSE(EnsureCertificate(dir.Join("bad.crt"), key).ok());
  EXPECT_FALSE(CertificateFingerprint(dir.Join("bad.crt")).ok());
  EXPECT_EQ(CertificateFingerprint(dir.Join("nope.crt")).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::net
