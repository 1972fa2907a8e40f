#include "crypto/crypt_config.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace cairn::crypto {
namespace {

// The image chunk size (index::kDefaultChunkSize; crypto sits below index).
constexpr uint32_t kZeroCacheLength = 4u << 20;

// HKDF-Expand (RFC 5869) for one 32-byte block: HMAC(prk, info || 0x01).
Key256 Expand(const Key256& prk, std::string_view info) {
  Bytes input(info.begin(), info.end());
  input.push_back(0x01);
  return HmacSha256(prk, input);
}

struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

EVP_CIPHER_CTX* ThreadCipherCtx() {
  thread_local std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter> ctx(EVP_CIPHER_CTX_new());
  if (!ctx) std::abort();
  return ctx.get();
}

const EVP_CIPHER* Aes256Gcm() {
  static EVP_CIPHER* cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  if (cipher == nullptr) std::abort();
  return cipher;
}

Digest ZerosId(const Key256& id_key, uint32_t length) {
  Bytes zeros(length, 0);
  return HmacSha256(id_key, zeros);
}

}  // namespace

void RandomBytes(std::span<uint8_t> out) {
  if (out.empty()) return;
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1) std::abort();
}

Digest HmacSha256(ByteSpan key, ByteSpan data) {
  Digest out;
  unsigned int len = 0;
  static const uint8_t kEmpty = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           data.empty() ? &kEmpty : data.data(), data.size(), out.data(), &len) == nullptr) {
    std::abort();  // only on allocation failure
  }
  return out;
}

bool ConstantTimeEqual(ByteSpan a, ByteSpan b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::shared_ptr<const CryptConfig> CryptConfig::FromMasterKey(const Key256& master) {
  std::shared_ptr<CryptConfig> c(new CryptConfig());
  c->id_key_ = Expand(master, "cairn v1 chunk id");
  c->enc_key_ = Expand(master, "cairn v1 blob encryption");
  c->mac_key_ = Expand(master, "cairn v1 manifest mac");
  c->fingerprint_ = Expand(master, "cairn v1 fingerprint");
  c->zero_chunk_id_ = ZerosId(c->id_key_, kZeroCacheLength);
  return c;
}

CryptConfig::~CryptConfig() {
  OPENSSL_cleanse(id_key_.data(), id_key_.size());
  OPENSSL_cleanse(enc_key_.data(), enc_key_.size());
  OPENSSL_cleanse(mac_key_.data(), mac_key_.size());
}

std::array<uint8_t, kShortFingerprintSize> CryptConfig::ShortFingerprint() const {
  std::array<uint8_t, kShortFingerprintSize> s;
  std::memcpy(s.data(), fingerprint_.data(), s.size());
  return s;
}

std::string FingerprintText(const Digest& fingerprint) {
  std::string s;
  for (size_t i = 0; i < kShortFingerprintSize; ++i) {
    if (i) s += ':';
    s += fmt::format("{:02x}", fingerprint[i]);
  }
  return s;
}

std::string CryptConfig::FingerprintText() const { return crypto::FingerprintText(fingerprint_); }

Digest CryptConfig::ChunkId(ByteSpan plaintext) const { return HmacSha256(id_key_, plaintext); }

Digest CryptConfig::ZeroChunkId(uint32_t length) const {
  if (length == kZeroCacheLength) return zero_chunk_id_;
  return ZerosId(id_key_, length);
}

Digest CryptConfig::Mac(ByteSpan data) const { return HmacSha256(mac_key_, data); }

void CryptConfig::Encrypt(ByteSpan aad, ByteSpan plaintext, uint8_t* out,
                          std::span<uint8_t, kGcmNonceSize> nonce_out,
                          std::span<uint8_t, kGcmTagSize> tag_out) const {
  RandomBytes(nonce_out);
  EVP_CIPHER_CTX* ctx = ThreadCipherCtx();
  int len = 0;
  // The chunk size limit (16 MiB) keeps every length well inside int.
  if (EVP_EncryptInit_ex2(ctx, Aes256Gcm(), enc_key_.data(), nonce_out.data(), nullptr) != 1 ||
      (!aad.empty() &&
       EVP_EncryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1) ||
      (!plaintext.empty() && EVP_EncryptUpdate(ctx, out, &len, plaintext.data(),
                                               static_cast<int>(plaintext.size())) != 1) ||
      EVP_EncryptFinal_ex(ctx, out + plaintext.size(), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kGcmTagSize, tag_out.data()) != 1) {
    std::abort();  // AES-GCM encryption cannot fail on valid arguments
  }
}

Status CryptConfig::DecryptPieces(ByteSpan aad, ByteSpan ciphertext,
                                  std::span<const uint8_t, kGcmNonceSize> nonce,
                                  std::span<const uint8_t, kGcmTagSize> tag, size_t piece,
                                  const std::function<Status(ByteSpan)>& sink) const {
  thread_local Bytes buffer;
  piece = std::max<size_t>(piece, 16);
  if (buffer.size() < piece) buffer.resize(piece);
  EVP_CIPHER_CTX* ctx = ThreadCipherCtx();
  int len = 0;
  if (EVP_DecryptInit_ex2(ctx, Aes256Gcm(), enc_key_.data(), nonce.data(), nullptr) != 1 ||
      (!aad.empty() &&
       EVP_DecryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1)) {
    std::abort();
  }
  Status first_error;
  for (size_t off = 0; off < ciphertext.size(); off += piece) {
    const size_t n = std::min(piece, ciphertext.size() - off);
    if (EVP_DecryptUpdate(ctx, buffer.data(), &len, ciphertext.data() + off,
                          static_cast<int>(n)) != 1) {
      std::abort();
    }
    // After a sink error the rest is still decrypted, to tell tampering
    // (the tag) from a consumer's complaint.
    if (first_error.ok()) first_error = sink(ByteSpan(buffer.data(), static_cast<size_t>(len)));
  }
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kGcmTagSize,
                          const_cast<uint8_t*>(tag.data())) != 1) {
    std::abort();
  }
  if (EVP_DecryptFinal_ex(ctx, buffer.data(), &len) != 1) {
    return DataLossError(
        "authentication failed (AES-GCM tag mismatch): the data was tampered with or "
        "encrypted with another key");
  }
  return first_error;
}

Status CryptConfig::Decrypt(ByteSpan aad, ByteSpan ciphertext,
                            std::span<const uint8_t, kGcmNonceSize> nonce,
                            std::span<const uint8_t, kGcmTagSize> tag, uint8_t* out) const {
  EVP_CIPHER_CTX* ctx = ThreadCipherCtx();
  int len = 0;
  if (EVP_DecryptInit_ex2(ctx, Aes256Gcm(), enc_key_.data(), nonce.data(), nullptr) != 1) {
    std::abort();
  }
  if ((!aad.empty() &&
       EVP_DecryptUpdate(ctx, nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1) ||
      (!ciphertext.empty() && EVP_DecryptUpdate(ctx, out, &len, ciphertext.data(),
                                                static_cast<int>(ciphertext.size())) != 1)) {
    std::abort();
  }
  if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kGcmTagSize,
                          const_cast<uint8_t*>(tag.data())) != 1) {
    std::abort();
  }
  if (EVP_DecryptFinal_ex(ctx, out + ciphertext.size(), &len) != 1) {
    return DataLossError(
        "authentication failed (AES-GCM tag mismatch): the data was tampered with or "
        "encrypted with another key");
  }
  return Status::Ok();
}

}  // namespace cairn::crypto
