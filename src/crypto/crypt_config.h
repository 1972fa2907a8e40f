// CryptConfig: the keys of an encrypted datastore client, derived from one
// random 256-bit master key (the one a key file wraps, crypto/key_file.h).
//
//   id key     HMAC-SHA256 key naming chunks: id = HMAC(id key, plaintext), so
//              equal data under different keys gets different ids and the
//              store cannot confirm a guess of the content
//   enc key    AES-256-GCM key of every encrypted blob (chunks, blob archives)
//   mac key    HMAC-SHA256 key signing manifests
//   fingerprint  names the key; stored in manifests and (its first 8 bytes)
//              in every encrypted blob header
//
// Each is HKDF-Expand(master, label) with a distinct label (docs/FORMAT.md,
// "Encryption"); the master key is uniformly random, so no extract step.
//
// Thread safety: immutable after construction; every method may be called
// from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "base/bytes.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::crypto {

using Key256 = std::array<uint8_t, 32>;
inline constexpr size_t kGcmNonceSize = 12;
inline constexpr size_t kGcmTagSize = 16;
inline constexpr size_t kShortFingerprintSize = 8;

// Cryptographically secure random bytes (OpenSSL's DRBG). Aborts only when
// the system has no entropy source at all.
void RandomBytes(std::span<uint8_t> out);

// HMAC-SHA256 (one shot).
Digest HmacSha256(ByteSpan key, ByteSpan data);

// Constant-time comparison of two equal-length byte strings.
bool ConstantTimeEqual(ByteSpan a, ByteSpan b);

// "3f:a2:…:09": the first 8 bytes of a key fingerprint, as PBS prints them.
std::string FingerprintText(const Digest& fingerprint);

class CryptConfig {
 public:
  static std::shared_ptr<const CryptConfig> FromMasterKey(const Key256& master);
  ~CryptConfig();
  CryptConfig(const CryptConfig&) = delete;
  CryptConfig& operator=(const CryptConfig&) = delete;

  const Digest& fingerprint() const { return fingerprint_; }
  std::array<uint8_t, kShortFingerprintSize> ShortFingerprint() const;
  // "3f:a2:…" (the first 8 bytes, as PBS prints key fingerprints).
  std::string FingerprintText() const;

  // HMAC-SHA256(id key, plaintext): the chunk id.
  Digest ChunkId(ByteSpan plaintext) const;
  // The id of `length` zero bytes (cached for the 4 MiB image chunk size).
  Digest ZeroChunkId(uint32_t length) const;
  // HMAC-SHA256(mac key, data): the manifest signature.
  Digest Mac(ByteSpan data) const;

  // AES-256-GCM with a fresh random nonce. `out` holds plaintext.size()
  // bytes and may be `plaintext.data()` itself (in place).
  void Encrypt(ByteSpan aad, ByteSpan plaintext, uint8_t* out,
               std::span<uint8_t, kGcmNonceSize> nonce_out,
               std::span<uint8_t, kGcmTagSize> tag_out) const;
  // DataLoss when the tag does not match (tampered data, header or nonce, or
  // another key). `out` holds ciphertext.size() bytes, may equal the input.
  Status Decrypt(ByteSpan aad, ByteSpan ciphertext, std::span<const uint8_t, kGcmNonceSize> nonce,
                 std::span<const uint8_t, kGcmTagSize> tag, uint8_t* out) const;
  // Decrypt() in pieces of at most `piece` bytes, each handed to `sink` as
  // it is decrypted (in a per-thread buffer that stays in cache), so a
  // consumer such as a decompressor never needs the whole plaintext at once.
  // The pieces are not authenticated until this returns Ok: a consumer must
  // not release anything before. DataLoss when the tag does not match (even
  // if `sink` failed first); else the first error of `sink`.
  Status DecryptPieces(ByteSpan aad, ByteSpan ciphertext,
                       std::span<const uint8_t, kGcmNonceSize> nonce,
                       std::span<const uint8_t, kGcmTagSize> tag, size_t piece,
                       const std::function<Status(ByteSpan)>& sink) const;

 private:
  CryptConfig() = default;
  Key256 id_key_{};
  Key256 enc_key_{};
  Key256 mac_key_{};
  Digest fingerprint_{};
  Digest zero_chunk_id_{};  // of kZeroCacheLength zero bytes
};

}  // namespace cairn::crypto
