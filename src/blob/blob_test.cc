#include "blob/blob.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "format/magic.h"
#include "tests/unit_test_util.h"

namespace cairn::blob {
namespace {

using test_util::CodeOf;

// Header offsets, from docs/FORMAT.md ("Blob"): tests write them by hand so a
// decoder that drifts from the spec fails here.
constexpr size_t kOffVersion = 8;
constexpr size_t kOffCompression = 10;
constexpr size_t kOffEncryption = 11;
constexpr size_t kOffStoredSize = 12;
constexpr size_t kOffRawSize = 16;
constexpr size_t kOffNonce = 20;
constexpr size_t kOffReserved = 56;
constexpr size_t kOffCrc = 60;

// Recomputes the CRC of a (possibly tampered) blob so the other checks run.
void Reseal(Bytes& b) {
  uint32_t crc = format::Crc32c(ByteSpan(b.data(), kOffCrc));
  crc = format::Crc32cExtend(crc, ByteSpan(b.data() + kHeaderSize, b.size() - kHeaderSize));
  format::PutU32(b.data() + kOffCrc, crc);
}

// A blob with the given fields and a correct CRC.
Bytes Craft(uint8_t compression, uint8_t encryption, uint32_t raw_size, ByteSpan payload) {
  Bytes b(kHeaderSize + payload.size(), 0);
  std::memcpy(b.data(), format::kBlobMagic.data(), 8);
  format::PutU16(b.data() + kOffVersion, format::kBlobVersion);
  b[kOffCompression] = compression;
  b[kOffEncryption] = encryption;
  format::PutU32(b.data() + kOffStoredSize, static_cast<uint32_t>(payload.size()));
  format::PutU32(b.data() + kOffRawSize, raw_size);
  if (!payload.empty()) std::memcpy(b.data() + kHeaderSize, payload.data(), payload.size());
  Reseal(b);
  return b;
}

Bytes Compressible(size_t n) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>("cairn backup "[i % 13]);
  return out;
}

Bytes EncodeOrDie(ByteSpan plain, const EncodeOptions& options = {}) {
  auto r = Encode(plain, options);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Bytes();
}

TEST(BlobTest, RoundTripsEmpty) {
  Bytes stored = EncodeOrDie(ByteSpan());
  EXPECT_EQ(stored.size(), kHeaderSize);
  auto header = Check(stored);
  CAIRN_ASSERT_OK(header);
  EXPECT_EQ(header->version, format::kBlobVersion);
  EXPECT_EQ(header->raw_size, 0u);
  EXPECT_EQ(header->stored_size, 0u);
  EXPECT_EQ(header->compression, Compression::kNone);
  EXPECT_EQ(header->encryption, Encryption::kNone);
  auto plain = Decode(stored);
  CAIRN_ASSERT_OK(plain);
  EXPECT_TRUE(plain->empty());
}

TEST(BlobTest, RoundTripsSmall) {
  Bytes data = test_util::RandomBytes(10, 1);
  Bytes stored = EncodeOrDie(data);
  EXPECT_EQ(stored.size(), kHeaderSize + data.size());
  EXPECT_EQ(0, std::memcmp(stored.data(), format::kBlobMagic.data(), 8));
  auto plain = Decode(stored);
  CAIRN_ASSERT_OK(plain);
  EXPECT_EQ(*plain, data);
}

TEST(BlobTest, CompressibleDataShrinks) {
  Bytes data = Compressible(256 << 10);
  Bytes stored = EncodeOrDie(data);
  EXPECT_LT(stored.size(), data.size() / 10);
  auto header = Check(stored);
  CAIRN_ASSERT_OK(header);
  EXPECT_EQ(header->compression, Compression::kZstd);
  EXPECT_EQ(header->raw_size, data.size());
  EXPECT_EQ(header->stored_size, stored.size() - kHeaderSize);
  auto plain = Decode(stored);
  CAIRN_ASSERT_OK(plain);
  EXPECT_EQ(*plain, data);
}

TEST(BlobTest, IncompressibleDataIsStoredRaw) {
  Bytes data = test_util::RandomBytes(256 << 10, 2);
  Bytes stored = EncodeOrDie(data);
  EXPECT_EQ(stored.size(), kHeaderSize + data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), stored.begin() + kHeaderSize));
  auto header = Check(stored);
  CAIRN_ASSERT_OK(header);
  EXPECT_EQ(header->compression, Compression::kNone);
  auto plain = Decode(stored);
  CAIRN_ASSERT_OK(plain);
  EXPECT_EQ(*plain, data);
}

TEST(BlobTest, CompressionCanBeTurnedOff) {
  Bytes data = Compressible(10000);
  Bytes stored = EncodeOrDie(data, EncodeOptions{.compress = false});
  EXPECT_EQ(stored.size(), kHeaderSize + data.size());
  auto plain = Decode(stored);
  CAIRN_ASSERT_OK(plain);
  EXPECT_EQ(*plain, data);
}

TEST(BlobTest, RoundTripsEverySmallSize) {
  for (size_t n = 0; n < 200; ++n) {
    Bytes data = (n % 2 == 0) ? Compressible(n) : test_util::RandomBytes(n, n);
    auto stored = Encode(data);
    CAIRN_ASSERT_OK(stored);
    auto plain = Decode(*stored);
    CAIRN_ASSERT_OK(plain);
    ASSERT_EQ(*plain, data) << n;
  }
}

TEST(BlobTest, SizeLimit) {
  Bytes max(kMaxRawSize, 0);
  auto at_limit = Encode(max);
  CAIRN_ASSERT_OK(at_limit);
  auto plain = Decode(*at_limit);
  CAIRN_ASSERT_OK(plain);
  EXPECT_EQ(plain->size(), kMaxRawSize);

  Bytes over(kMaxRawSize + 1, 0);
  auto r = Encode(over);
  EXPECT_EQ(CodeOf(r), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("limit"), std::string_view::npos);
}

// Every single-bit flip anywhere (header, CRC, payload) must be caught.
void ExpectEveryBitFlipDetected(Bytes stored) {
  for (size_t bit = 0; bit < stored.size() * 8; ++bit) {
    stored[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    ASSERT_EQ(CodeOf(Check(stored)), StatusCode::kDataLoss) << "bit " << bit;
    ASSERT_EQ(CodeOf(Decode(stored)), StatusCode::kDataLoss) << "bit " << bit;
    stored[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
  }
  CAIRN_ASSERT_OK(Decode(stored));
}

TEST(BlobTest, EveryBitFlipIsDetectedInRawBlob) {
  ExpectEveryBitFlipDetected(EncodeOrDie(test_util::RandomBytes(40, 3)));
}

TEST(BlobTest, EveryBitFlipIsDetectedInCompressedBlob) {
  Bytes stored = EncodeOrDie(Compressible(300));
  ASSERT_EQ(Check(stored)->compression, Compression::kZstd);
  ExpectEveryBitFlipDetected(stored);
}

TEST(BlobTest, EveryTruncationIsDetected) {
  for (Bytes stored : {EncodeOrDie(test_util::RandomBytes(100, 4)), EncodeOrDie(Compressible(500))}) {
    for (size_t len = 0; len < stored.size(); ++len) {
      ByteSpan cut(stored.data(), len);
      ASSERT_EQ(CodeOf(Check(cut)), StatusCode::kDataLoss) << len;
      ASSERT_EQ(CodeOf(Decode(cut)), StatusCode::kDataLoss) << len;
    }
    stored.push_back(0);  // and a trailing extra byte
    EXPECT_EQ(CodeOf(Check(stored)), StatusCode::kDataLoss);
  }
}

TEST(BlobTest, WrongRawSizeIsDetected) {
  // Raw blob: raw size must equal stored size.
  Bytes raw = EncodeOrDie(test_util::RandomBytes(100, 5));
  format::PutU32(raw.data() + kOffRawSize, 101);
  Reseal(raw);
  EXPECT_EQ(CodeOf(Decode(raw)), StatusCode::kDataLoss);

  // Compressed blob: the frame must decompress to exactly raw size.
  Bytes data = Compressible(5000);
  Bytes z = EncodeOrDie(data);
  ASSERT_EQ(Check(z)->compression, Compression::kZstd);
  for (uint32_t wrong : {4999u, 5001u, 10000u, static_cast<uint32_t>(z.size() - kHeaderSize)}) {
    Bytes t = z;
    format::PutU32(t.data() + kOffRawSize, wrong);
    Reseal(t);
    EXPECT_EQ(CodeOf(Decode(t)), StatusCode::kDataLoss) << wrong;
  }
  // Larger than the limit, even with a matching CRC.
  Bytes huge = z;
  format::PutU32(huge.data() + kOffRawSize, kMaxRawSize + 1);
  Reseal(huge);
  EXPECT_EQ(CodeOf(Check(huge)), StatusCode::kDataLoss);
}

TEST(BlobTest, StoredSizeFieldMustMatchLength) {
  Bytes stored = EncodeOrDie(test_util::RandomBytes(100, 6));
  format::PutU32(stored.data() + kOffStoredSize, 99);
  Reseal(stored);
  auto r = Check(stored);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("size"), std::string_view::npos);
}

TEST(BlobTest, DecodeChunkChecksTheId) {
  Bytes data = Compressible(1000);
  Bytes stored = EncodeOrDie(data);
  auto ok = DecodeChunk(stored, crypto::Sha256(data));
  CAIRN_ASSERT_OK(ok);
  EXPECT_EQ(*ok, data);
  crypto::Digest wrong = crypto::Sha256(data);
  wrong[31] ^= 1;
  auto r = DecodeChunk(stored, wrong);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("id"), std::string_view::npos);
}

TEST(BlobTest, GarbageZstdPayloadWithCorrectCrcIsDataLoss) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Bytes garbage = test_util::RandomBytes(100 + seed, seed);
    Bytes stored = Craft(1, 0, 1000, garbage);
    CAIRN_ASSERT_OK(Check(stored));  // only decompression can tell
    ASSERT_EQ(CodeOf(Decode(stored)), StatusCode::kDataLoss) << seed;
  }
  // A real frame with its magic intact but a corrupted body.
  Bytes frame(ZSTD_compressBound(4000));
  Bytes data = test_util::RandomBytes(4000, 77);
  for (size_t i = 0; i < data.size(); i += 3) data[i] = 0;  // somewhat compressible
  size_t n = ZSTD_compress(frame.data(), frame.size(), data.data(), data.size(), 1);
  ASSERT_FALSE(ZSTD_isError(n));
  frame.resize(n);
  ASSERT_LT(n, data.size());
  for (size_t pos = 8; pos < frame.size(); pos += 7) {
    Bytes bad = frame;
    bad[pos] ^= 0x5a;
    auto r = Decode(Craft(1, 0, static_cast<uint32_t>(data.size()), bad));
    if (r.ok()) {
      // zstd frames carry no mandatory checksum: a body flip may decode, but
      // then to the declared size (DecodeChunk's SHA-256 catches the rest).
      EXPECT_EQ(r->size(), data.size());
    } else {
      EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << pos;
    }
  }
  // An empty "zstd" payload for an empty plaintext: zstd reads zero frames
  // as zero bytes, which is what the header promises; anything else is loss.
  auto empty = Decode(Craft(1, 0, 0, ByteSpan()));
  if (empty.ok()) {
    EXPECT_TRUE(empty->empty());
  } else {
    EXPECT_EQ(CodeOf(empty), StatusCode::kDataLoss);
  }
  EXPECT_EQ(CodeOf(Decode(Craft(1, 0, 1, ByteSpan()))), StatusCode::kDataLoss);
}

TEST(BlobTest, HandCraftedValidBlobsDecode) {
  Bytes plain = test_util::RandomBytes(33, 8);
  auto raw = Decode(Craft(0, 0, 33, plain));
  CAIRN_ASSERT_OK(raw);
  EXPECT_EQ(*raw, plain);
}

TEST(BlobTest, NonZeroReservedBytesAreRejected) {
  Bytes base = EncodeOrDie(test_util::RandomBytes(50, 9));
  for (size_t off = kOffReserved; off < kOffCrc; ++off) {
    Bytes t = base;
    t[off] = 1;
    Reseal(t);
    EXPECT_EQ(CodeOf(Check(t)), StatusCode::kDataLoss) << off;
  }
  // Encryption fields (nonce, tag, key fingerprint) on an unencrypted blob.
  for (size_t off = kOffNonce; off < kOffReserved; ++off) {
    Bytes t = base;
    t[off] = 0x80;
    Reseal(t);
    EXPECT_EQ(CodeOf(Check(t)), StatusCode::kDataLoss) << off;
  }
}

TEST(BlobTest, UnknownFieldValuesAreRejected) {
  Bytes base = EncodeOrDie(test_util::RandomBytes(50, 10));
  Bytes t = base;
  t[kOffCompression] = 2;
  Reseal(t);
  EXPECT_EQ(CodeOf(Check(t)), StatusCode::kDataLoss);
  t = base;
  t[kOffEncryption] = 2;
  Reseal(t);
  EXPECT_EQ(CodeOf(Check(t)), StatusCode::kDataLoss);
  t = base;
  format::PutU16(t.data() + kOffVersion, 2);
  Reseal(t);
  auto r = Check(t);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("version"), std::string_view::npos);
  // Compressed payload larger than the plaintext is not something we write.
  Bytes big = Craft(1, 0, 10, test_util::RandomBytes(20, 11));
  EXPECT_EQ(CodeOf(Check(big)), StatusCode::kDataLoss);
}

TEST(BlobTest, EncryptedBlobWithoutKeyIsUnauthenticated) {
  Bytes t = Craft(0, 1, 50, test_util::RandomBytes(50, 12));
  auto r = Decode(t);
  EXPECT_EQ(CodeOf(r), StatusCode::kUnauthenticated);
  EXPECT_NE(r.status().message().find("--keyfile"), std::string_view::npos) << r.status().ToString();
}

std::shared_ptr<const crypto::CryptConfig> TestKey(uint8_t fill) {
  crypto::Key256 k;
  k.fill(fill);
  return crypto::CryptConfig::FromMasterKey(k);
}

Bytes EncodeEncrypted(ByteSpan plain, const crypto::CryptConfig& key) {
  EncodeOptions o;
  o.crypt = &key;
  auto b = Encode(plain, o);
  EXPECT_TRUE(b.ok());
  return b.ok() ? *b : Bytes{};
}

bool Contains(const Bytes& haystack, std::string_view needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) !=
         haystack.end();
}

TEST(BlobTest, EncryptedRoundTripCompressedAndRaw) {
  auto key = TestKey(1);
  const std::string marker = "CAIRN-PLAINTEXT-MARKER-7f3a";
  Bytes text = Compressible(100000);
  Bytes random = test_util::RandomBytes(50000, 13);
  std::copy(marker.begin(), marker.end(), random.begin() + 1000);
  std::copy(marker.begin(), marker.end(), text.begin() + 1000);
  for (const Bytes& plain : {text, random, Bytes{}, Bytes{1}}) {
    Bytes stored = EncodeEncrypted(plain, *key);
    auto header = Check(stored);
    CAIRN_ASSERT_OK(header);
    EXPECT_EQ(header->encryption, Encryption::kAes256Gcm);
    EXPECT_EQ(header->key_print, key->ShortFingerprint());
    EXPECT_EQ(header->raw_size, plain.size());
    EXPECT_FALSE(Contains(stored, marker));
    auto back = Decode(stored, key.get());
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(*back, plain);
    auto chunk = DecodeChunk(stored, key->ChunkId(plain), key.get());
    CAIRN_ASSERT_OK(chunk);
    // The plain SHA-256 is not an encrypted chunk's id.
    EXPECT_EQ(CodeOf(DecodeChunk(stored, crypto::Sha256(plain), key.get())),
              StatusCode::kDataLoss);
  }
  // The plain encoding keeps the marker readable: the check above means something.
  EXPECT_TRUE(Contains(EncodeOrDie(random), marker));
  // Two encodings of the same data differ (fresh nonces) and both decode.
  EXPECT_NE(EncodeEncrypted(random, *key), EncodeEncrypted(random, *key));
}

TEST(BlobTest, EncryptedBlobNeedsItsOwnKey) {
  auto key = TestKey(1);
  auto other = TestKey(2);
  Bytes stored = EncodeEncrypted(test_util::RandomBytes(1000, 14), *key);
  auto no_key = Decode(stored);
  EXPECT_EQ(CodeOf(no_key), StatusCode::kUnauthenticated);
  auto wrong = Decode(stored, other.get());
  EXPECT_EQ(CodeOf(wrong), StatusCode::kUnauthenticated);
  EXPECT_NE(wrong.status().message().find("another key"), std::string_view::npos)
      << wrong.status().ToString();
  // Anyone can still check the stored checksum.
  CAIRN_EXPECT_OK(Check(stored));
}

TEST(BlobTest, TamperedEncryptedBlobFailsAuthentication) {
  auto key = TestKey(1);
  Bytes plain = Compressible(20000);
  Bytes good = EncodeEncrypted(plain, *key);
  // Every byte of the header but the CRC, and payload bytes: flipped and
  // resealed (CRC recomputed, as an attacker would), never decodes.
  std::vector<size_t> offsets;
  for (size_t i = 0; i < kOffCrc; ++i) offsets.push_back(i);
  for (size_t i = kHeaderSize; i < good.size(); i += 997) offsets.push_back(i);
  offsets.push_back(good.size() - 1);
  for (size_t off : offsets) {
    Bytes t = good;
    t[off] ^= 0x01;
    Reseal(t);
    auto r = Decode(t, key.get());
    EXPECT_FALSE(r.ok()) << "offset " << off;
    if (off >= 48 && off < 56) continue;  // the key print: "another key"
    if (off == kOffEncryption) continue;  // now "unencrypted": fields-set error
    EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << "offset " << off << ": " << r.status().ToString();
  }
}

TEST(BlobTest, PlainChunkInAnEncryptedSnapshotIsRejected) {
  auto key = TestKey(1);
  Bytes plain = test_util::RandomBytes(1000, 15);
  // Even when named with the right keyed id, a plain blob is not accepted
  // where the key says chunks are encrypted.
  auto r = DecodeChunk(EncodeOrDie(plain), key->ChunkId(plain), key.get());
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_EQ(ChunkId(plain, nullptr), crypto::Sha256(plain));
  EXPECT_EQ(ChunkId(plain, key.get()), key->ChunkId(plain));
}

// An encrypted, compressed blob around an arbitrary zstd payload, with a
// valid tag and CRC: what only a holder of the key could write.
Bytes SealEncrypted(const crypto::CryptConfig& key, uint32_t raw_size, ByteSpan compressed) {
  Bytes b = Craft(1, 1, raw_size, compressed);
  auto print = key.ShortFingerprint();
  std::memcpy(b.data() + 48, print.data(), print.size());
  Bytes aad(b.begin(), b.begin() + 20);
  aad.insert(aad.end(), b.begin() + 48, b.begin() + 56);
  key.Encrypt(aad, ByteSpan(b.data() + kHeaderSize, compressed.size()), b.data() + kHeaderSize,
              std::span<uint8_t, crypto::kGcmNonceSize>(b.data() + kOffNonce, 12),
              std::span<uint8_t, crypto::kGcmTagSize>(b.data() + 32, 16));
  Reseal(b);
  return b;
}

Bytes Zstd(ByteSpan plain) {
  Bytes out(ZSTD_compressBound(plain.size()));
  size_t n = ZSTD_compress(out.data(), out.size(), plain.data(), plain.size(), 1);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(BlobTest, EncryptedLargeBlobsDecodeAcrossDecryptPieces) {
  auto key = TestKey(3);
  // Several 128 KiB decrypt pieces, compressible and not, up to the limit.
  for (size_t n : {size_t{128} << 10, (size_t{128} << 10) + 1, size_t{4} << 20, size_t{kMaxRawSize}}) {
    Bytes plain = Compressible(n);
    for (size_t i = 0; i < n; i += 4096) plain[i] = static_cast<uint8_t>(i >> 12);
    Bytes stored = EncodeEncrypted(plain, *key);
    ASSERT_EQ(Check(stored)->compression, Compression::kZstd) << n;
    Bytes scratch;
    auto view = DecodeChunkView(stored, key->ChunkId(plain), &scratch, key.get());
    CAIRN_ASSERT_OK(view);
    EXPECT_TRUE(std::equal(view->begin(), view->end(), plain.begin(), plain.end())) << n;
    // The last piece tampered: caught by the tag even though zstd saw it.
    Bytes t = stored;
    t[t.size() - 2] ^= 0x10;
    Reseal(t);
    EXPECT_EQ(CodeOf(Decode(t, key.get())), StatusCode::kDataLoss) << n;
  }
}

TEST(BlobTest, AuthenticatedButMalformedZstdIsDataLoss) {
  auto key = TestKey(4);
  Bytes plain = Compressible(300000);
  Bytes frame = Zstd(plain);
  // Sound: decodes.
  auto good = Decode(SealEncrypted(*key, plain.size(), frame), key.get());
  CAIRN_ASSERT_OK(good);
  EXPECT_EQ(*good, plain);
  // Truncated frame, trailing bytes, a header that claims less or more.
  Bytes cut(frame.begin(), frame.end() - 7);
  Bytes trailing = frame;
  trailing.push_back(0);
  for (const auto& [raw, payload] : std::vector<std::pair<uint32_t, Bytes>>{
           {static_cast<uint32_t>(plain.size()), cut},
           {static_cast<uint32_t>(plain.size()), trailing},
           {static_cast<uint32_t>(plain.size() - 1), frame},
           {static_cast<uint32_t>(plain.size() + 1), frame},
           {static_cast<uint32_t>(plain.size()), test_util::RandomBytes(1000, 21)}}) {
    auto r = Decode(SealEncrypted(*key, raw, payload), key.get());
    EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << raw << " " << payload.size();
  }
}

TEST(BlobTest, EncodeIntoReusesTheBufferAndMatchesEncode) {
  Bytes buffer(1 << 20, 0xAA);  // larger, dirty: must be resized and overwritten
  for (const Bytes& plain : {Compressible(5000), test_util::RandomBytes(3000, 20), Bytes{}}) {
    CAIRN_ASSERT_OK(EncodeInto(plain, {}, &buffer));
    EXPECT_EQ(buffer, EncodeOrDie(plain));
    auto back = Decode(buffer);
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(*back, plain);
  }
  EXPECT_EQ(CodeOf(EncodeInto(Bytes(kMaxRawSize + 1, 0), {}, &buffer)),
            StatusCode::kInvalidArgument);
}

TEST(BlobTest, DecodeViewPointsIntoStoredOrScratch) {
  Bytes raw_plain = test_util::RandomBytes(2000, 21);
  Bytes raw = EncodeOrDie(raw_plain);
  Bytes scratch;
  auto view = DecodeView(raw, &scratch);
  CAIRN_ASSERT_OK(view);
  EXPECT_EQ(view->data(), raw.data() + kHeaderSize);  // no copy for a raw blob
  EXPECT_TRUE(std::equal(view->begin(), view->end(), raw_plain.begin(), raw_plain.end()));

  Bytes z_plain = Compressible(20000);
  Bytes z = EncodeOrDie(z_plain);
  scratch.assign(50, 1);
  auto zview = DecodeView(z, &scratch);
  CAIRN_ASSERT_OK(zview);
  EXPECT_EQ(zview->data(), scratch.data());
  EXPECT_TRUE(std::equal(zview->begin(), zview->end(), z_plain.begin(), z_plain.end()));

  auto chunk = DecodeChunkView(z, crypto::Sha256(z_plain), &scratch);
  CAIRN_ASSERT_OK(chunk);
  EXPECT_EQ(chunk->size(), z_plain.size());
  crypto::Digest wrong = crypto::Sha256(z_plain);
  wrong[0] ^= 1;
  EXPECT_EQ(CodeOf(DecodeChunkView(z, wrong, &scratch)), StatusCode::kDataLoss);
  z.back() ^= 1;
  EXPECT_EQ(CodeOf(DecodeView(z, &scratch)), StatusCode::kDataLoss);
}

TEST(BlobTest, CrcMismatchMessageNamesBothValues) {
  Bytes stored = EncodeOrDie(test_util::RandomBytes(50, 13));
  stored.back() ^= 1;
  auto r = Check(stored);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("CRC mismatch"), std::string_view::npos);
  EXPECT_NE(r.status().message().find("computed 0x"), std::string_view::npos);
}

}  // namespace
}  // namespace cairn::blob
