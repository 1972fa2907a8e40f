// Blob: the stored form of every chunk, every NAME.blob archive and every
// manifest. A 64-byte header (magic, version, compression, encryption slots,
// sizes, CRC32C over header and payload) followed by the payload, which is
// the plaintext compressed with zstd, or stored raw when compression does not
// shrink it. docs/FORMAT.md has the byte layout.
//
// Decoding treats input as hostile: every field is bounds-checked and every
// failure is a DataLoss (or InvalidArgument for unsupported features) Status;
// nothing asserts on data.
//
// Thread safety: pure functions (zstd contexts are thread-local).
#pragma once

#include <cstdint>

#include "base/bytes.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::blob {

inline constexpr size_t kHeaderSize = 64;
// Largest plaintext a blob may hold: 16 MiB (4× the image chunk size).
inline constexpr uint32_t kMaxRawSize = 16u << 20;

enum class Compression : uint8_t { kNone = 0, kZstd = 1 };
enum class Encryption : uint8_t { kNone = 0, kAes256Gcm = 1 };  // kAes256Gcm: reserved

struct Header {
  uint16_t version = 0;
  Compression compression = Compression::kNone;
  Encryption encryption = Encryption::kNone;
  uint32_t stored_size = 0;  // payload bytes after the header
  uint32_t raw_size = 0;     // plaintext bytes
  uint32_t crc = 0;
};

struct EncodeOptions {
  bool compress = true;
  int zstd_level = 1;  // PBS's choice: fast, and restore speed does not depend on it
};

// Encodes `plaintext`. InvalidArgument when it is larger than kMaxRawSize.
Result<Bytes> Encode(ByteSpan plaintext, const EncodeOptions& options = {});
// The same into `out`, reusing its capacity (the backup hot path).
Status EncodeInto(ByteSpan plaintext, const EncodeOptions& options, Bytes* out);

// Parses the header and checks the CRC over header and payload, without
// decompressing. DataLoss names the field that is wrong.
Result<Header> Check(ByteSpan stored);

// Check() then decompress. DataLoss on any inconsistency.
Result<Bytes> Decode(ByteSpan stored);

// Decode() then compare SHA-256 of the plaintext with `id`.
Result<Bytes> DecodeChunk(ByteSpan stored, const crypto::Digest& id);

// The hot-path forms: Check(), then the plaintext as a view into `stored`
// itself when the blob is uncompressed (no copy), or decompressed into
// `scratch` (reusing its capacity). The view is valid while `stored` and
// `scratch` are neither changed nor destroyed.
Result<ByteSpan> DecodeView(ByteSpan stored, Bytes* scratch);
Result<ByteSpan> DecodeChunkView(ByteSpan stored, const crypto::Digest& id, Bytes* scratch);

}  // namespace cairn::blob
