#include "index/fixed_index.h"

#include <gtest/gtest.h>

#include "format/coding.h"
#include "format/crc32c.h"
#include "tests/unit_test_util.h"

namespace cairn::index {
namespace {

using test_util::CodeOf;

constexpr uint32_t kChunk = kMinChunkSize;  // 64 KiB keeps the tests small
constexpr size_t kOffChunkSize = 12;
constexpr size_t kOffImageSize = 16;
constexpr size_t kOffChunkCount = 24;
constexpr size_t kOffHeaderCrc = 64;

FixedIndex MakeIndex(uint64_t image_size, uint32_t chunk_size = kChunk, uint64_t seed = 1) {
  std::vector<crypto::Digest> digests(FixedIndex::ChunkCount(image_size, chunk_size));
  for (size_t i = 0; i < digests.size(); ++i) {
    Bytes b = test_util::RandomBytes(32, seed * 1000 + i);
    std::copy(b.begin(), b.end(), digests[i].begin());
  }
  return FixedIndex(image_size, chunk_size, std::move(digests));
}

// Rewrites the header CRC after a deliberate change to the header.
void ResealHeader(Bytes& file) {
  format::PutU32(file.data() + kOffHeaderCrc, format::Crc32c(ByteSpan(file.data(), 64)));
}

TEST(FixedIndexTest, ChunkCount) {
  EXPECT_EQ(FixedIndex::ChunkCount(0, kChunk), 0u);
  EXPECT_EQ(FixedIndex::ChunkCount(1, kChunk), 1u);
  EXPECT_EQ(FixedIndex::ChunkCount(kChunk, kChunk), 1u);
  EXPECT_EQ(FixedIndex::ChunkCount(kChunk + 1, kChunk), 2u);
  EXPECT_EQ(FixedIndex::ChunkCount(kMaxImageSize, kMinChunkSize), kMaxImageSize / kMinChunkSize);
}

TEST(FixedIndexTest, ValidateChunkSize) {
  CAIRN_EXPECT_OK(FixedIndex::ValidateChunkSize(kMinChunkSize));
  CAIRN_EXPECT_OK(FixedIndex::ValidateChunkSize(kDefaultChunkSize));
  CAIRN_EXPECT_OK(FixedIndex::ValidateChunkSize(kMaxChunkSize));
  for (uint32_t bad : {0u, 1u, kMinChunkSize / 2, kMaxChunkSize * 2, 3 * kMinChunkSize,
                       kDefaultChunkSize + 1, 0x80000000u}) {
    EXPECT_EQ(CodeOf(FixedIndex::ValidateChunkSize(bad)), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(FixedIndexTest, RoundTripsAllShapes) {
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{kChunk}, uint64_t{3} * kChunk,
                        uint64_t{3} * kChunk + 5, uint64_t{kChunk} - 1}) {
    FixedIndex idx = MakeIndex(size);
    Bytes file = idx.Encode();
    ASSERT_EQ(file.size(), kFixedIndexHeaderSize + 32 * idx.chunk_count()) << size;
    auto back = FixedIndex::Decode(file);
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(back->image_size(), size);
    EXPECT_EQ(back->chunk_size(), kChunk);
    EXPECT_EQ(back->chunk_count(), FixedIndex::ChunkCount(size, kChunk));
    EXPECT_EQ(back->digests(), idx.digests());
    EXPECT_EQ(back->csum(), idx.csum());
    EXPECT_EQ(back->Encode(), file);
  }
}

TEST(FixedIndexTest, DefaultChunkSizeRoundTrips) {
  FixedIndex idx = MakeIndex(uint64_t{10} << 20, kDefaultChunkSize);
  EXPECT_EQ(idx.chunk_count(), 3u);
  auto back = FixedIndex::Decode(idx.Encode());
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->chunk_size(), kDefaultChunkSize);
  EXPECT_EQ(back->ChunkLength(2), 2u << 20);
}

TEST(FixedIndexTest, ChunkOffsetsAndLengths) {
  FixedIndex idx = MakeIndex(uint64_t{3} * kChunk + 5);
  ASSERT_EQ(idx.chunk_count(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(idx.ChunkOffset(i), i * kChunk);
    EXPECT_EQ(idx.ChunkLength(i), kChunk);
  }
  EXPECT_EQ(idx.ChunkOffset(3), 3u * kChunk);
  EXPECT_EQ(idx.ChunkLength(3), 5u);

  FixedIndex exact = MakeIndex(uint64_t{2} * kChunk);
  EXPECT_EQ(exact.ChunkLength(1), kChunk);
  FixedIndex tiny = MakeIndex(1);
  EXPECT_EQ(tiny.ChunkLength(0), 1u);
}

TEST(FixedIndexTest, CsumIsSha256OfDigests) {
  FixedIndex idx = MakeIndex(uint64_t{2} * kChunk + 1);
  Bytes all;
  for (const auto& d : idx.digests()) all.insert(all.end(), d.begin(), d.end());
  EXPECT_EQ(idx.csum(), crypto::Sha256(all));
  EXPECT_EQ(FixedIndex().csum(), crypto::Digest{});  // default-constructed: no digests hashed
  EXPECT_EQ(MakeIndex(0).csum(), crypto::Sha256(ByteSpan()));
}

TEST(FixedIndexTest, DecodeRejectsEveryTruncation) {
  Bytes file = MakeIndex(uint64_t{2} * kChunk + 7).Encode();
  for (size_t len = 0; len < file.size(); ++len) {
    ASSERT_EQ(CodeOf(FixedIndex::Decode(ByteSpan(file.data(), len))), StatusCode::kDataLoss)
        << len;
  }
  file.push_back(0);
  EXPECT_EQ(CodeOf(FixedIndex::Decode(file)), StatusCode::kDataLoss);
}

TEST(FixedIndexTest, DecodeRejectsFlippedDigestByte) {
  Bytes file = MakeIndex(uint64_t{4} * kChunk).Encode();
  for (size_t pos = kFixedIndexHeaderSize; pos < file.size(); pos += 13) {
    Bytes t = file;
    t[pos] ^= 0x01;
    auto r = FixedIndex::Decode(t);
    ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << pos;
    EXPECT_NE(r.status().message().find("checksum"), std::string_view::npos) << r.status().ToString();
  }
}

TEST(FixedIndexTest, DecodeRejectsEveryFlippedHeaderByte) {
  Bytes file = MakeIndex(uint64_t{2} * kChunk).Encode();
  for (size_t pos = 0; pos < kFixedIndexHeaderSize; ++pos) {
    Bytes t = file;
    t[pos] ^= 0x10;
    ASSERT_EQ(CodeOf(FixedIndex::Decode(t)), StatusCode::kDataLoss) << pos;
  }
}

TEST(FixedIndexTest, DecodeRejectsNonZeroReservedBytesEvenWithValidCrc) {
  Bytes file = MakeIndex(kChunk).Encode();
  for (size_t pos : {size_t{10}, size_t{11}}) {
    Bytes t = file;
    t[pos] = 1;
    ResealHeader(t);
    EXPECT_EQ(CodeOf(FixedIndex::Decode(t)), StatusCode::kDataLoss) << pos;
  }
}

TEST(FixedIndexTest, DecodeRejectsWrongChunkCount) {
  FixedIndex idx = MakeIndex(uint64_t{3} * kChunk);
  Bytes file = idx.Encode();
  // Count says 4, image size says 3 (and 4 digests are not there either).
  Bytes t = file;
  format::PutU64(t.data() + kOffChunkCount, 4);
  ResealHeader(t);
  auto r = FixedIndex::Decode(t);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("chunks"), std::string_view::npos) << r.status().ToString();
  // Count and digests agree, but the image size needs another count.
  t = file;
  format::PutU64(t.data() + kOffImageSize, uint64_t{4} * kChunk);
  ResealHeader(t);
  EXPECT_EQ(CodeOf(FixedIndex::Decode(t)), StatusCode::kDataLoss);
  // A huge count must not make the decoder allocate or overflow.
  t = file;
  format::PutU64(t.data() + kOffChunkCount, ~uint64_t{0} / 32 + 2);
  ResealHeader(t);
  EXPECT_EQ(CodeOf(FixedIndex::Decode(t)), StatusCode::kDataLoss);
}

TEST(FixedIndexTest, DecodeRejectsInvalidChunkSizeAndImageSize) {
  Bytes file = MakeIndex(uint64_t{2} * kChunk).Encode();
  for (uint32_t cs : {0u, kChunk + 1, kMaxChunkSize * 2, kMinChunkSize / 2}) {
    Bytes t = file;
    format::PutU32(t.data() + kOffChunkSize, cs);
    ResealHeader(t);
    auto r = FixedIndex::Decode(t);
    EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << cs;
    EXPECT_NE(r.status().message().find("chunk size"), std::string_view::npos);
  }
  Bytes t = file;
  format::PutU64(t.data() + kOffImageSize, kMaxImageSize + 1);
  ResealHeader(t);
  EXPECT_EQ(CodeOf(FixedIndex::Decode(t)), StatusCode::kDataLoss);
}

TEST(FixedIndexTest, ZeroChunkDigestIsSha256OfZeros) {
  EXPECT_EQ(ZeroChunkDigest(kDefaultChunkSize), crypto::Sha256(Bytes(kDefaultChunkSize, 0)));
  EXPECT_EQ(ZeroChunkDigest(kChunk), crypto::Sha256(Bytes(kChunk, 0)));
  EXPECT_EQ(ZeroChunkDigest(5), crypto::Sha256(Bytes(5, 0)));
  EXPECT_EQ(ZeroChunkDigest(0), crypto::Sha256(ByteSpan()));
  EXPECT_NE(ZeroChunkDigest(kChunk), ZeroChunkDigest(kDefaultChunkSize));
}

TEST(FixedIndexTest, ReadFixedIndexNamesThePath) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  std::string path = dir.Join("disk0.img.fidx");
  FixedIndex idx = MakeIndex(uint64_t{2} * kChunk + 3);
  test_util::WriteFileOrFail(path, idx.Encode());
  auto back = ReadFixedIndex(*env, path);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->digests(), idx.digests());

  Bytes file = idx.Encode();
  file.pop_back();  // truncated by one byte
  test_util::WriteFileOrFail(path, file);
  auto bad = ReadFixedIndex(*env, path);
  EXPECT_EQ(CodeOf(bad), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(path), std::string_view::npos);
  EXPECT_EQ(CodeOf(ReadFixedIndex(*env, dir.Join("missing.fidx"))), StatusCode::kNotFound);
}

// ScanFixedIndex streams what ReadFixedIndex returns whole, in windows of
// 1 MiB: an index of 70 000 chunks spans three windows, the last one short.
TEST(FixedIndexTest, ScanStreamsEveryDigestAcrossWindows) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  for (uint64_t size : {uint64_t{0}, uint64_t{kChunk} * 3 + 5, uint64_t{kChunk} * 70000 - 1}) {
    std::string path = dir.Join("disk0.img.fidx");
    FixedIndex idx = MakeIndex(size);
    test_util::WriteFileOrFail(path, idx.Encode());
    std::vector<crypto::Digest> seen;
    auto info = ScanFixedIndex(*env, path, [&](size_t i, const crypto::Digest& d) {
      EXPECT_EQ(i, seen.size());
      seen.push_back(d);
    });
    CAIRN_ASSERT_OK(info);
    EXPECT_EQ(seen, idx.digests()) << size;
    EXPECT_EQ(info->image_size, size);
    EXPECT_EQ(info->chunk_size, kChunk);
    EXPECT_EQ(info->chunk_count, idx.chunk_count());
    EXPECT_EQ(info->csum, idx.csum());
  }
}

TEST(FixedIndexTest, ScanRejectsWhatDecodeRejects) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  std::string path = dir.Join("disk0.img.fidx");
  auto scan = [&](const Bytes& file) {
    test_util::WriteFileOrFail(path, file);
    return ScanFixedIndex(*env, path, [](size_t, const crypto::Digest&) {});
  };
  const Bytes file = MakeIndex(uint64_t{40000} * kChunk + 9).Encode();  // two windows
  for (size_t len : {size_t{0}, size_t{100}, kFixedIndexHeaderSize - 1, kFixedIndexHeaderSize,
                     file.size() - 32, file.size() - 1}) {
    auto r = scan(Bytes(file.begin(), file.begin() + len));
    ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << len;
    EXPECT_NE(r.status().message().find(path), std::string_view::npos) << r.status().ToString();
  }
  Bytes longer = file;
  longer.push_back(0);
  EXPECT_EQ(CodeOf(scan(longer)), StatusCode::kDataLoss);
  // A flipped digest byte in either window: the checksum catches it at the end.
  for (size_t pos : {kFixedIndexHeaderSize + 5, file.size() - 3}) {
    Bytes t = file;
    t[pos] ^= 0x40;
    auto r = scan(t);
    ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << pos;
    EXPECT_NE(r.status().message().find("checksum"), std::string_view::npos)
        << r.status().ToString();
  }
  Bytes header = file;
  header[kOffChunkSize] ^= 0x01;  // CRC no longer matches
  EXPECT_EQ(CodeOf(scan(header)), StatusCode::kDataLoss);
  EXPECT_EQ(
      CodeOf(ScanFixedIndex(*env, dir.Join("missing.fidx"), [](size_t, const crypto::Digest&) {})),
      StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::index
