#include "blob/blob.h"

// ZSTD_d_stableOutBuffer (experimental in 1.5, stable in behaviour since 1.4.4).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"

namespace cairn::blob {
namespace {

// Header byte offsets (docs/FORMAT.md, "Blob").
constexpr size_t kOffVersion = 8;
constexpr size_t kOffCompression = 10;
constexpr size_t kOffEncryption = 11;
constexpr size_t kOffStoredSize = 12;
constexpr size_t kOffRawSize = 16;
constexpr size_t kOffNonce = 20;      // 12 bytes, AES-GCM nonce
constexpr size_t kOffTag = 32;        // 16 bytes, AES-GCM tag
constexpr size_t kOffKeyPrint = 48;   // 8 bytes, key fingerprint
constexpr size_t kOffReserved = 56;   // 4 bytes, zero
constexpr size_t kOffCrc = 60;

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> ctx(ZSTD_createCCtx());
  return ctx.get();
}
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
  return ctx.get();
}

// Associated data of an encrypted blob: header bytes [0, 20) (magic,
// version, compression, encryption, sizes) and the key fingerprint, so none
// of them can be changed without failing authentication.
std::array<uint8_t, 28> Aad(const uint8_t* h) {
  std::array<uint8_t, 28> aad;
  std::memcpy(aad.data(), h, kOffNonce);
  std::memcpy(aad.data() + kOffNonce, h + kOffKeyPrint, crypto::kShortFingerprintSize);
  return aad;
}

// Decrypted pieces of this size stay in the L2 cache on their way to zstd.
constexpr size_t kDecryptPiece = 128 << 10;

// A decompression context that writes straight into the caller's buffer
// (ZSTD_d_stableOutBuffer: no internal window copy), for the streaming
// decrypt-and-decompress path.
ZSTD_DCtx* ThreadStreamDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx([] {
    ZSTD_DCtx* c = ZSTD_createDCtx();
    if (c != nullptr) ZSTD_DCtx_setParameter(c, ZSTD_d_stableOutBuffer, 1);
    return c;
  }());
  return ctx.get();
}

// An encrypted, compressed payload: AES-GCM decrypts it piece by piece and
// each piece goes to zstd while still in cache, instead of decrypting all
// of it into memory and reading it back (one pass over the data instead of
// three). Nothing is returned before the tag authenticated the whole.
template <typename Scratch>
Status DecryptDecompress(const crypto::CryptConfig& crypt, const uint8_t* h, ByteSpan payload,
                         uint32_t raw_size, Scratch* out_buffer) {
  ResizeForWrite(out_buffer, raw_size);
  ZSTD_DCtx* d = ThreadStreamDCtx();
  ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
  ZSTD_outBuffer out{out_buffer->data(), out_buffer->size(), 0};
  size_t hint = 1;  // ZSTD_decompressStream's return: 0 once the frame is complete
  auto feed = [&](ByteSpan piece) -> Status {
    ZSTD_inBuffer in{piece.data(), piece.size(), 0};
    while (in.pos < in.size) {
      if (hint == 0) return DataLossError("zstd: data after the end of the frame");
      const size_t in_before = in.pos;
      const size_t out_before = out.pos;
      hint = ZSTD_decompressStream(d, &out, &in);
      if (ZSTD_isError(hint)) return DataLossError(fmt::format("zstd: {}", ZSTD_getErrorName(hint)));
      if (in.pos == in_before && out.pos == out_before) {
        return DataLossError(fmt::format("decompresses to more than the {} bytes the header says",
                                         raw_size));
      }
    }
    return Status::Ok();
  };
  auto aad = Aad(h);
  CAIRN_RETURN_IF_ERROR(crypt.DecryptPieces(
      aad, payload, std::span<const uint8_t, crypto::kGcmNonceSize>(h + kOffNonce, 12),
      std::span<const uint8_t, crypto::kGcmTagSize>(h + kOffTag, 16), kDecryptPiece, feed));
  while (hint != 0) {  // all input given: let zstd flush what it holds
    ZSTD_inBuffer in{nullptr, 0, 0};
    const size_t out_before = out.pos;
    hint = ZSTD_decompressStream(d, &out, &in);
    if (ZSTD_isError(hint)) return DataLossError(fmt::format("zstd: {}", ZSTD_getErrorName(hint)));
    if (out.pos == out_before && hint != 0) return DataLossError("zstd: truncated frame");
  }
  if (out.pos != raw_size) {
    return DataLossError(fmt::format("decompressed to {} bytes, header says {}", out.pos, raw_size));
  }
  return Status::Ok();
}

uint32_t ComputeCrc(ByteSpan stored) {
  uint32_t crc = format::Crc32cExtend(0, stored.first(kOffCrc));
  return format::Crc32cExtend(crc, stored.subspan(kHeaderSize));
}

}  // namespace

Result<Bytes> Encode(ByteSpan plaintext, const EncodeOptions& options) {
  Bytes out;
  CAIRN_RETURN_IF_ERROR(EncodeInto(plaintext, options, &out));
  return out;
}

Status EncodeInto(ByteSpan plaintext, const EncodeOptions& options, Bytes* out_buffer) {
  if (plaintext.size() > kMaxRawSize) {
    return InvalidArgumentError(fmt::format("blob of {} bytes exceeds the limit of {} bytes",
                                            plaintext.size(), kMaxRawSize));
  }
  Bytes& out = *out_buffer;
  out.resize(kHeaderSize + plaintext.size());
  Compression compression = Compression::kNone;
  size_t payload = plaintext.size();
  if (options.compress && plaintext.size() > 64) {
    // Capacity one byte less than the input: zstd fails fast with
    // dstSize_tooSmall when compression would not shrink the data.
    size_t n = ZSTD_compressCCtx(ThreadCCtx(), out.data() + kHeaderSize, plaintext.size() - 1,
                                 plaintext.data(), plaintext.size(), options.zstd_level);
    if (!ZSTD_isError(n)) {
      compression = Compression::kZstd;
      payload = n;
    }
  }
  if (compression == Compression::kNone && !plaintext.empty()) {
    std::memcpy(out.data() + kHeaderSize, plaintext.data(), plaintext.size());
  }
  out.resize(kHeaderSize + payload);
  uint8_t* h = out.data();
  std::memset(h, 0, kHeaderSize);
  std::memcpy(h, format::kBlobMagic.data(), 8);
  format::PutU16(h + kOffVersion, format::kBlobVersion);
  h[kOffCompression] = static_cast<uint8_t>(compression);
  h[kOffEncryption] = static_cast<uint8_t>(options.crypt != nullptr ? Encryption::kAes256Gcm
                                                                     : Encryption::kNone);
  format::PutU32(h + kOffStoredSize, static_cast<uint32_t>(payload));
  format::PutU32(h + kOffRawSize, static_cast<uint32_t>(plaintext.size()));
  if (options.crypt != nullptr) {
    auto print = options.crypt->ShortFingerprint();
    std::memcpy(h + kOffKeyPrint, print.data(), print.size());
    auto aad = Aad(h);
    uint8_t* data = out.data() + kHeaderSize;
    options.crypt->Encrypt(aad, ByteSpan(data, payload), data,
                           std::span<uint8_t, crypto::kGcmNonceSize>(h + kOffNonce, 12),
                           std::span<uint8_t, crypto::kGcmTagSize>(h + kOffTag, 16));
  }
  format::PutU32(h + kOffCrc, ComputeCrc(out));
  return Status::Ok();
}

Result<Header> Check(ByteSpan stored) {
  if (stored.size() < kHeaderSize) {
    return DataLossError(
        fmt::format("blob truncated: {} bytes, shorter than the {}-byte header", stored.size(),
                    kHeaderSize));
  }
  const uint8_t* h = stored.data();
  if (std::memcmp(h, format::kBlobMagic.data(), 8) != 0) {
    return DataLossError("not a cairn blob (bad magic)");
  }
  Header header;
  header.version = format::GetU16(h + kOffVersion);
  if (header.version != format::kBlobVersion) {
    return DataLossError(fmt::format("unsupported blob version {}", header.version));
  }
  header.stored_size = format::GetU32(h + kOffStoredSize);
  header.raw_size = format::GetU32(h + kOffRawSize);
  header.crc = format::GetU32(h + kOffCrc);
  if (stored.size() - kHeaderSize != header.stored_size) {
    return DataLossError(fmt::format("blob size mismatch: header says {} payload bytes, found {}",
                                     header.stored_size, stored.size() - kHeaderSize));
  }
  uint32_t crc = ComputeCrc(stored);
  if (crc != header.crc) {
    return DataLossError(
        fmt::format("CRC mismatch (stored 0x{:08x}, computed 0x{:08x})", header.crc, crc));
  }
  // The CRC matched, so what follows is what the writer wrote; still, a
  // hostile writer must not make us misbehave.
  uint8_t comp = h[kOffCompression];
  uint8_t enc = h[kOffEncryption];
  if (comp > 1) return DataLossError(fmt::format("unknown compression {}", comp));
  if (enc > 1) return DataLossError(fmt::format("unknown encryption {}", enc));
  header.compression = static_cast<Compression>(comp);
  header.encryption = static_cast<Encryption>(enc);
  if (format::GetU32(h + kOffReserved) != 0) return DataLossError("reserved header bytes not zero");
  if (header.encryption == Encryption::kNone) {
    bool clean = std::all_of(h + kOffNonce, h + kOffReserved, [](uint8_t b) { return b == 0; });
    if (!clean) return DataLossError("encryption fields set on an unencrypted blob");
  }
  std::memcpy(header.key_print.data(), h + kOffKeyPrint, header.key_print.size());
  if (header.raw_size > kMaxRawSize) {
    return DataLossError(fmt::format("raw size {} exceeds the limit of {}", header.raw_size,
                                     kMaxRawSize));
  }
  if (header.compression == Compression::kNone && header.encryption == Encryption::kNone &&
      header.stored_size != header.raw_size) {
    return DataLossError(fmt::format("uncompressed blob: stored size {} != raw size {}",
                                     header.stored_size, header.raw_size));
  }
  if (header.stored_size > header.raw_size) {
    return DataLossError(fmt::format("stored size {} larger than raw size {}", header.stored_size,
                                     header.raw_size));
  }
  return header;
}

namespace {

template <typename Scratch>
Result<ByteSpan> DecodeViewInto(ByteSpan stored, Scratch* scratch,
                                const crypto::CryptConfig* crypt) {
  CAIRN_ASSIGN_OR_RETURN(Header header, Check(stored));
  ByteSpan payload = stored.subspan(kHeaderSize);
  if (header.encryption != Encryption::kNone) {
    std::string print = ToHex(header.key_print);
    if (crypt == nullptr) {
      return UnauthenticatedError(fmt::format(
          "encrypted (key fingerprint {}...): give its key file with --keyfile or "
          "CAIRN_KEYFILE",
          print.substr(0, 16)));
    }
    if (header.key_print != crypt->ShortFingerprint()) {
      return UnauthenticatedError(
          fmt::format("encrypted with another key (fingerprint {}..., the key given is {})",
                      print.substr(0, 16), crypt->FingerprintText()));
    }
    const uint8_t* h = stored.data();
    if (header.compression != Compression::kNone) {
      CAIRN_RETURN_IF_ERROR(DecryptDecompress(*crypt, h, payload, header.raw_size, scratch));
      return ByteSpan(*scratch);
    }
    // Uncompressed: decrypt straight into `scratch`, the result.
    ResizeForWrite(scratch, payload.size());
    auto aad = Aad(h);
    CAIRN_RETURN_IF_ERROR(crypt->Decrypt(
        aad, payload, std::span<const uint8_t, crypto::kGcmNonceSize>(h + kOffNonce, 12),
        std::span<const uint8_t, crypto::kGcmTagSize>(h + kOffTag, 16), scratch->data()));
    return ByteSpan(*scratch);
  }
  if (header.compression == Compression::kNone) return payload;
  ResizeForWrite(scratch, header.raw_size);
  size_t n = ZSTD_decompressDCtx(ThreadDCtx(), scratch->data(), scratch->size(), payload.data(),
                                 payload.size());
  if (ZSTD_isError(n)) {
    return DataLossError(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
  }
  if (n != header.raw_size) {
    return DataLossError(
        fmt::format("decompressed to {} bytes, header says {}", n, header.raw_size));
  }
  return ByteSpan(*scratch);
}

template <typename Scratch>
Result<ByteSpan> DecodeChunkViewInto(ByteSpan stored, const crypto::Digest& id, Scratch* scratch,
                                     const crypto::CryptConfig* crypt) {
  if (crypt != nullptr && stored.size() > kOffEncryption &&
      stored[kOffEncryption] == static_cast<uint8_t>(Encryption::kNone)) {
    CAIRN_RETURN_IF_ERROR(Check(stored).status());
    return DataLossError("chunk is not encrypted, but its snapshot is");
  }
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, DecodeViewInto(stored, scratch, crypt));
  crypto::Digest actual = ChunkId(plain, crypt);
  if (actual != id) {
    return DataLossError(fmt::format("content does not match its id ({} {})",
                                     crypt != nullptr ? "keyed id" : "SHA-256",
                                     crypto::DigestHex(actual)));
  }
  return plain;
}

}  // namespace

Result<ByteSpan> DecodeView(ByteSpan stored, Bytes* scratch, const crypto::CryptConfig* crypt) {
  return DecodeViewInto(stored, scratch, crypt);
}
Result<ByteSpan> DecodeView(ByteSpan stored, ReadBuffer* scratch,
                            const crypto::CryptConfig* crypt) {
  return DecodeViewInto(stored, scratch, crypt);
}
Result<ByteSpan> DecodeChunkView(ByteSpan stored, const crypto::Digest& id, Bytes* scratch,
                                 const crypto::CryptConfig* crypt) {
  return DecodeChunkViewInto(stored, id, scratch, crypt);
}
Result<ByteSpan> DecodeChunkView(ByteSpan stored, const crypto::Digest& id, ReadBuffer* scratch,
                                 const crypto::CryptConfig* crypt) {
  return DecodeChunkViewInto(stored, id, scratch, crypt);
}

Result<Bytes> Decode(ByteSpan stored, const crypto::CryptConfig* crypt) {
  Bytes scratch;
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, DecodeView(stored, &scratch, crypt));
  if (plain.data() == scratch.data()) return scratch;
  return Bytes(plain.begin(), plain.end());
}

Result<Bytes> DecodeChunk(ByteSpan stored, const crypto::Digest& id,
                          const crypto::CryptConfig* crypt) {
  Bytes scratch;
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain, DecodeChunkView(stored, id, &scratch, crypt));
  if (plain.data() == scratch.data()) return scratch;
  return Bytes(plain.begin(), plain.end());
}

}  // namespace cairn::blob
