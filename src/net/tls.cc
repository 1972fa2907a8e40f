// Self-signed certificates and fingerprints over OpenSSL 3 (EVP_PKEY, X509).

#include "net/tls.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "base/unique_fd.h"

namespace cairn::net {
namespace {

constexpr long kValiditySeconds = 10L * 365 * 24 * 3600 + 3 * 24 * 3600;  // 10 years + leap days

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct ExtFree {
  void operator()(X509_EXTENSION* e) const { X509_EXTENSION_free(e); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using ExtPtr = std::unique_ptr<X509_EXTENSION, ExtFree>;

// The queued OpenSSL errors as one line (and clears the queue).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsIpAddress(const std::string& name) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, name.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

// A DNS name or IP address fit for the SAN list: no separators that
// OpenSSL's config syntax would split on, nothing unprintable.
bool IsPlainName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.' || c == ':' || c == '*' || c == '_';
    if (!ok) return false;
  }
  return true;
}

Status AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  ExtPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(cert, ext.get(), -1) != 1) {
    return InternalError("certificate extension " + std::string(OBJ_nid2sn(nid)) + "=" + value +
                         ": " + OpenSslErrors());
  }
  return Status::Ok();
}

Result<X509Ptr> MakeCertificate(EVP_PKEY* key, const std::vector<std::string>& extra_names) {
  std::string san = "DNS:localhost,IP:127.0.0.1,IP:::1";
  for (const std::string& name : extra_names) {
    if (!IsPlainName(name)) {
      return InvalidArgumentError("certificate name \"" + name +
                                  "\": not a DNS name or an IP address");
    }
    san += (IsIpAddress(name) ? ",IP:" : ",DNS:") + name;
  }
  X509Ptr cert(X509_new());
  if (!cert) return InternalError("X509_new: " + OpenSslErrors());
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return InternalError("RAND_bytes failed");
  serial[0] &= 0x7f;  // positive
  serial[0] |= 0x01;  // and not zero-padded
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  bool serial_ok = bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  if (!serial_ok) return InternalError("certificate serial: " + OpenSslErrors());

  X509_NAME* name = X509_get_subject_name(cert.get());
  bool ok =
      X509_set_version(cert.get(), 2) == 1 &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds) != nullptr &&
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("cairn"), -1, -1, 0) == 1 &&
      X509_set_issuer_name(cert.get(), name) == 1 && X509_set_pubkey(cert.get(), key) == 1;
  if (!ok) return InternalError("certificate fields: " + OpenSslErrors());
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature"));
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), NID_ext_key_usage, "serverAuth"));
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_key_identifier, "hash"));
  CAIRN_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_alt_name, san));
  if (X509_sign(cert.get(), key, EVP_sha256()) <= 0) {
    return InternalError("signing the certificate: " + OpenSslErrors());
  }
  return cert;
}

std::string BioContents(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, n > 0 ? static_cast<size_t>(n) : 0);
}

void SyncDirectoryOf(const std::string& path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());  // best effort: the files themselves are synced
}

// Writes `contents` to a temporary file beside `path` with `mode`, syncs
// it and moves it to `path` without replacing anything there.
Status WriteNewFile(const std::string& path, const std::string& contents, mode_t mode) {
  std::string tmp = path + ".tmp-XXXXXX";
  UniqueFd fd(::mkstemp(tmp.data()));
  if (fd.get() < 0) return ErrnoToStatus(errno, "create a temporary file for " + path);
  auto fail = [&](std::string_view what) {
    Status s = ErrnoToStatus(errno, std::string(what) + " " + tmp);
    ::unlink(tmp.c_str());
    return s;
  };
  if (::fchmod(fd.get(), mode) != 0) return fail("chmod");
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail("write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return fail("fsync");
  if (::close(fd.release()) != 0) return fail("close");
  // link() fails with EEXIST instead of replacing, unlike rename().
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    if (err == EEXIST) return AlreadyExistsError(path + " already exists; not overwriting it");
    return ErrnoToStatus(err, "link " + tmp + " to " + path);
  }
  ::unlink(tmp.c_str());
  return Status::Ok();
}

Result<std::string> ReadSmallFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoToStatus(errno, "open " + path);
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (1 << 20)) return InvalidArgumentError(path + ": too large for a PEM file");
  }
  return out;
}

Result<X509Ptr> LoadCertificate(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(path));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) {
    return InvalidArgumentError("certificate " + path + ": not a PEM certificate (" +
                                OpenSslErrors() + ")");
  }
  return cert;
}

Result<PkeyPtr> LoadPrivateKey(const std::string& path) {
  CAIRN_ASSIGN_OR_RETURN(std::string pem, ReadSmallFile(path));
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key) {
    return InvalidArgumentError("private key " + path + ": not a PEM private key (" +
                                OpenSslErrors() + ")");
  }
  return key;
}

}  // namespace

Status GenerateSelfSigned(const std::string& cert_path, const std::string& key_path,
                          const std::vector<std::string>& extra_names) {
  for (const std::string* p : {&key_path, &cert_path}) {
    if (PathExists(*p)) return AlreadyExistsError(*p + " already exists; not overwriting it");
  }
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return InternalError("generating an EC P-256 key: " + OpenSslErrors());
  CAIRN_ASSIGN_OR_RETURN(X509Ptr cert, MakeCertificate(key.get(), extra_names));

  BioPtr key_bio(BIO_new(BIO_s_mem()));
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  if (!key_bio || !cert_bio ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1 ||
      PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return InternalError("encoding the certificate and key as PEM: " + OpenSslErrors());
  }
  std::string key_pem = BioContents(key_bio.get());
  Status s = WriteNewFile(key_path, key_pem, 0600);
  OPENSSL_cleanse(key_pem.data(), key_pem.size());
  CAIRN_RETURN_IF_ERROR(s);
  s = WriteNewFile(cert_path, BioContents(cert_bio.get()), 0644);
  if (!s.ok()) {
    ::unlink(key_path.c_str());  // ours, written just above; a key alone is of no use
    return s;
  }
  SyncDirectoryOf(key_path);
  SyncDirectoryOf(cert_path);
  return Status::Ok();
}

Status EnsureCertificate(const std::string& cert_path, const std::string& key_path,
                         const std::vector<std::string>& extra_names) {
  bool have_cert = PathExists(cert_path);
  bool have_key = PathExists(key_path);
  if (!have_cert && !have_key) return GenerateSelfSigned(cert_path, key_path, extra_names);
  if (!have_cert) {
    return FailedPreconditionError("TLS key " + key_path + " exists but its certificate " +
                                   cert_path + " is missing; restore it or remove the key");
  }
  if (!have_key) {
    return FailedPreconditionError("TLS certificate " + cert_path + " exists but its key " +
                                   key_path + " is missing; restore it or remove the certificate");
  }
  CAIRN_ASSIGN_OR_RETURN(X509Ptr cert, LoadCertificate(cert_path));
  CAIRN_ASSIGN_OR_RETURN(PkeyPtr key, LoadPrivateKey(key_path));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return FailedPreconditionError("TLS key " + key_path + " does not match the certificate " +
                                   cert_path);
  }
  return Status::Ok();
}

Status CheckPrivateKeyFile(const std::string& key_path) {
  struct stat st;
  if (::stat(key_path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat " + key_path);
  if (!S_ISREG(st.st_mode)) {
    return FailedPreconditionError("TLS key " + key_path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    return PermissionDeniedError(fmt::format(
        "TLS key {} is accessible by group or others (mode {:04o}): refusing to use it; run "
        "chmod 600 {}",
        key_path, st.st_mode & 07777, key_path));
  }
  return Status::Ok();
}

std::string FingerprintOfDer(ByteSpan der) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(der.data(), der.size(), md, &len, EVP_sha256(), nullptr) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 3);
  for (unsigned int i = 0; i < len; ++i) {
    if (i > 0) out += ':';
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

Result<std::string> CertificateFingerprint(const std::string& cert_pem_path) {
  CAIRN_ASSIGN_OR_RETURN(X509Ptr cert, LoadCertificate(cert_pem_path));
  unsigned char* der = nullptr;
  int len = i2d_X509(cert.get(), &der);
  if (len <= 0) return InternalError("encoding " + cert_pem_path + " as DER: " + OpenSslErrors());
  std::string fp = FingerprintOfDer(ByteSpan(der, static_cast<size_t>(len)));
  OPENSSL_free(der);
  return fp;
}

Result<std::string> NormalizeFingerprint(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\n' ||
                           text.back() == '\r')) {
    text.remove_suffix(1);
  }
  auto bad = [&] {
    return InvalidArgumentError("fingerprint \"" + std::string(text) +
                                "\": expected 64 hex digits (SHA-256), optionally as pairs "
                                "separated by ':'");
  };
  bool colons = text.size() == 95;
  if (!colons && text.size() != 64) return bad();
  std::string out;
  out.reserve(95);
  size_t digits = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (colons && i % 3 == 2) {
      if (c != ':') return bad();
      out += ':';
      continue;
    }
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return bad();
    if (!colons && digits > 0 && digits % 2 == 0) out += ':';
    out += c;
    ++digits;
  }
  return out;
}

}  // namespace cairn::net
