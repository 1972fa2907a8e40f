// Blob: the stored form of every chunk, every NAME.blob archive and every
// manifest. A 64-byte header (magic, version, compression, encryption, sizes,
// AES-GCM nonce and tag, key fingerprint, CRC32C over header and payload)
// followed by the payload: the plaintext compressed with zstd (or raw when
// compression does not shrink it), then, with a key, encrypted with
// AES-256-GCM. docs/FORMAT.md has the byte layout.
//
// The CRC covers the stored bytes, so anyone can check a blob for bit rot
// without the key (Check()); only the key holder can check its content.
//
// Decoding treats input as hostile: every field is bounds-checked and every
// failure is a DataLoss (or InvalidArgument for unsupported features) Status;
// nothing asserts on data.
//
// Thread safety: pure functions (zstd contexts are thread-local).
#pragma once

#include <cstdint>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"

namespace cairn::blob {

inline constexpr size_t kHeaderSize = 64;
// Largest plaintext a blob may hold: 16 MiB (4× the image chunk size).
inline constexpr uint32_t kMaxRawSize = 16u << 20;

enum class Compression : uint8_t { kNone = 0, kZstd = 1 };
enum class Encryption : uint8_t { kNone = 0, kAes256Gcm = 1 };

struct Header {
  uint16_t version = 0;
  Compression compression = Compression::kNone;
  Encryption encryption = Encryption::kNone;
  uint32_t stored_size = 0;  // payload bytes after the header
  uint32_t raw_size = 0;     // plaintext bytes
  uint32_t crc = 0;
  // Encrypted blobs: the first 8 bytes of the key's fingerprint.
  std::array<uint8_t, crypto::kShortFingerprintSize> key_print{};
};

struct EncodeOptions {
  bool compress = true;
  int zstd_level = 1;  // PBS's choice: fast, and restore speed does not depend on it
  // Encrypt with this key (AES-256-GCM, fresh random nonce); null: plain.
  const crypto::CryptConfig* crypt = nullptr;
};

// A chunk's id: HMAC-SHA256 under the key's id key when `crypt` is set
// (encrypted snapshots), else the SHA-256 of the plaintext.
inline crypto::Digest ChunkId(ByteSpan plaintext, const crypto::CryptConfig* crypt) {
  return crypt != nullptr ? crypt->ChunkId(plaintext) : crypto::Sha256(plaintext);
}

// Encodes `plaintext`. InvalidArgument when it is larger than kMaxRawSize.
Result<Bytes> Encode(ByteSpan plaintext, const EncodeOptions& options = {});
// The same into `out`, reusing its capacity (the backup hot path).
Status EncodeInto(ByteSpan plaintext, const EncodeOptions& options, Bytes* out);

// Parses the header and checks the CRC over header and payload, without
// decompressing. DataLoss names the field that is wrong.
Result<Header> Check(ByteSpan stored);
// The length of the whole blob (kHeaderSize + stored size) as its header,
// the first kHeaderSize bytes of `header`, declares it: a cheap test for a
// file cut short (a power cut before its contents were written back).
// DataLoss when `header` is short or has no blob magic and version.
Result<uint64_t> DeclaredLength(ByteSpan header);

// Check(), decrypt (an encrypted blob needs `crypt`), decompress. DataLoss on
// any inconsistency or a failed authentication; FailedPrecondition when the
// blob is encrypted and `crypt` is null or another key.
Result<Bytes> Decode(ByteSpan stored, const crypto::CryptConfig* crypt = nullptr);

// Decode() then compare ChunkId(plaintext, crypt) with `id`. With `crypt`,
// an unencrypted blob is DataLoss: a chunk of an encrypted snapshot must be
// encrypted.
Result<Bytes> DecodeChunk(ByteSpan stored, const crypto::Digest& id,
                          const crypto::CryptConfig* crypt = nullptr);

// The hot-path forms: Check(), then the plaintext as a view into `stored`
// itself when the blob is neither compressed nor encrypted (no copy), or
// decoded into `scratch` (reusing its capacity). The view is valid while
// `stored` and `scratch` are neither changed nor destroyed.
// A ReadBuffer `scratch` (the pipelines' per-thread one) is never zero-filled
// and lives in huge pages.
Result<ByteSpan> DecodeView(ByteSpan stored, Bytes* scratch,
                            const crypto::CryptConfig* crypt = nullptr);
Result<ByteSpan> DecodeView(ByteSpan stored, ReadBuffer* scratch,
                            const crypto::CryptConfig* crypt = nullptr);
Result<ByteSpan> DecodeChunkView(ByteSpan stored, const crypto::Digest& id, Bytes* scratch,
                                 const crypto::CryptConfig* crypt = nullptr);
Result<ByteSpan> DecodeChunkView(ByteSpan stored, const crypto::Digest& id, ReadBuffer* scratch,
                                 const crypto::CryptConfig* crypt = nullptr);

}  // namespace cairn::blob
