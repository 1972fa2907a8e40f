#include "index/dynamic_index.h"

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "format/coding.h"
#include "format/crc32c.h"
#include "tests/unit_test_util.h"

namespace cairn::index {
namespace {

using test_util::CodeOf;

constexpr size_t kOffVersion = 8;
constexpr size_t kOffStreamSize = 16;
constexpr size_t kOffCount = 24;
constexpr size_t kOffCsum = 32;
constexpr size_t kOffHeaderCrc = 64;

// An index of chunks of the given lengths, with made-up digests.
DynamicIndex MakeIndex(const std::vector<uint64_t>& lengths, uint64_t seed = 1) {
  std::vector<DynamicEntry> entries;
  uint64_t end = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    end += lengths[i];
    DynamicEntry e{.end = end};
    Bytes b = test_util::RandomBytes(32, seed * 1000 + i);
    std::copy(b.begin(), b.end(), e.digest.begin());
    entries.push_back(e);
  }
  return DynamicIndex(std::move(entries));
}

// Rewrites the entry checksum and the header CRC after a deliberate change,
// so that the decoder gets past both and reaches the check under test.
void Reseal(Bytes& file) {
  crypto::Digest csum = crypto::Sha256(ByteSpan(file).subspan(kDynamicIndexHeaderSize));
  std::copy(csum.begin(), csum.end(), file.begin() + kOffCsum);
  format::PutU32(file.data() + kOffHeaderCrc, format::Crc32c(ByteSpan(file.data(), 64)));
}

uint8_t* EntryAt(Bytes& file, size_t i) {
  return file.data() + kDynamicIndexHeaderSize + i * kDynamicIndexEntrySize;
}

// Expects DataLoss with `what` in the message: the check meant, not another.
void ExpectDataLoss(const Bytes& file, std::string_view what) {
  auto r = DynamicIndex::Decode(file);
  ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << what;
  EXPECT_NE(r.status().message().find(what), std::string_view::npos) << r.status().ToString();
}

TEST(DynamicIndexTest, RoundTrips) {
  for (const std::vector<uint64_t>& lengths : {std::vector<uint64_t>{},
                                               {1},
                                               {blob::kMaxRawSize},
                                               {3, 1, 4, 1, 5, 9, 2, 6},
                                               {512 << 10, 2 << 20, 8 << 20, 100}}) {
    DynamicIndex idx = MakeIndex(lengths);
    Bytes file = idx.Encode();
    ASSERT_EQ(file.size(), kDynamicIndexHeaderSize + kDynamicIndexEntrySize * lengths.size());
    auto back = DynamicIndex::Decode(file);
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(back->chunk_count(), lengths.size());
    EXPECT_EQ(back->size(), idx.size());
    EXPECT_EQ(back->csum(), idx.csum());
    for (size_t i = 0; i < lengths.size(); ++i) {
      EXPECT_EQ(back->entry(i).end, idx.entry(i).end);
      EXPECT_EQ(back->digest(i), idx.digest(i));
      EXPECT_EQ(back->ChunkLength(i), lengths[i]);
    }
    EXPECT_EQ(back->Encode(), file);
  }
}

TEST(DynamicIndexTest, EmptyIndex) {
  DynamicIndex empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.chunk_count(), 0u);
  EXPECT_EQ(empty.csum(), crypto::Sha256(ByteSpan()));
  Bytes file = empty.Encode();
  EXPECT_EQ(file.size(), kDynamicIndexHeaderSize);
  EXPECT_EQ(file, DynamicIndex(std::vector<DynamicEntry>{}).Encode());
  auto back = DynamicIndex::Decode(file);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->chunk_count(), 0u);
  EXPECT_EQ(back->size(), 0u);
  EXPECT_EQ(back->csum(), empty.csum());
}

TEST(DynamicIndexTest, HeaderLayout) {
  DynamicIndex idx = MakeIndex({10, 20});
  Bytes file = idx.Encode();
  EXPECT_EQ(std::string(file.begin(), file.begin() + 8), "CAIRNDIX");
  EXPECT_EQ(format::GetU16(file.data() + kOffVersion), 1u);
  EXPECT_EQ(format::GetU64(file.data() + kOffStreamSize), 30u);
  EXPECT_EQ(format::GetU64(file.data() + kOffCount), 2u);
  EXPECT_EQ(format::GetU64(EntryAt(file, 0)), 10u);
  EXPECT_EQ(format::GetU64(EntryAt(file, 1)), 30u);
  EXPECT_TRUE(std::equal(idx.digest(1).begin(), idx.digest(1).end(), EntryAt(file, 1) + 8));
}

TEST(DynamicIndexTest, CsumIsSha256OfEncodedEntries) {
  DynamicIndex idx = MakeIndex({7, 8, 9});
  Bytes file = idx.Encode();
  EXPECT_EQ(idx.csum(), crypto::Sha256(ByteSpan(file).subspan(kDynamicIndexHeaderSize)));
  EXPECT_TRUE(std::equal(idx.csum().begin(), idx.csum().end(), file.begin() + kOffCsum));
  EXPECT_NE(idx.csum(), MakeIndex({7, 8, 9}, 2).csum());
  EXPECT_NE(idx.csum(), MakeIndex({7, 9, 8}).csum());
}

TEST(DynamicIndexTest, ChunkStartLengthAndFindChunk) {
  const std::vector<uint64_t> lengths = {1, 100, blob::kMaxRawSize, 5, 1};
  DynamicIndex idx = MakeIndex(lengths);
  uint64_t start = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_EQ(idx.ChunkStart(i), start);
    EXPECT_EQ(idx.ChunkLength(i), lengths[i]);
    uint64_t end = start + lengths[i];
    EXPECT_EQ(idx.FindChunk(start), i) << "start of chunk " << i;
    EXPECT_EQ(idx.FindChunk(end - 1), i) << "last byte of chunk " << i;
    EXPECT_EQ(idx.FindChunk(start + lengths[i] / 2), i) << "middle of chunk " << i;
    start = end;
  }
  EXPECT_EQ(idx.size(), start);
  EXPECT_EQ(idx.FindChunk(0), 0u);               // the first byte of the stream
  EXPECT_EQ(idx.FindChunk(idx.size() - 1), 4u);  // the last byte
  EXPECT_EQ(idx.FindChunk(101), 2u);
  EXPECT_EQ(idx.FindChunk(100), 1u);
}

TEST(DynamicIndexTest, DecodeRejectsTruncatedHeader) {
  Bytes file = MakeIndex({5, 6}).Encode();
  for (size_t len : {size_t{0}, size_t{8}, size_t{68}, kDynamicIndexHeaderSize - 1}) {
    auto r = DynamicIndex::Decode(ByteSpan(file.data(), len));
    ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << len;
    EXPECT_NE(r.status().message().find("truncated"), std::string_view::npos);
  }
}

TEST(DynamicIndexTest, DecodeRejectsEveryTruncationAndExtension) {
  Bytes file = MakeIndex({5, 6, 7}).Encode();
  for (size_t len = 0; len < file.size(); ++len) {
    ASSERT_EQ(CodeOf(DynamicIndex::Decode(ByteSpan(file.data(), len))), StatusCode::kDataLoss)
        << len;
  }
  file.push_back(0);
  ExpectDataLoss(file, "bytes of entries");
}

TEST(DynamicIndexTest, DecodeRejectsBadMagic) {
  Bytes file = MakeIndex({5}).Encode();
  file[7] = 'F';  // CAIRNDIF
  Reseal(file);
  ExpectDataLoss(file, "bad magic");
  Bytes fixed_like = MakeIndex({5}).Encode();
  std::copy_n("CAIRNFIX", 8, fixed_like.begin());
  Reseal(fixed_like);
  ExpectDataLoss(fixed_like, "bad magic");
}

TEST(DynamicIndexTest, DecodeRejectsHeaderCrcMismatch) {
  Bytes file = MakeIndex({5, 6}).Encode();
  for (size_t pos :
       {size_t{8}, size_t{16}, size_t{24}, size_t{40}, size_t{63}, size_t{64}, size_t{67}}) {
    Bytes t = file;
    t[pos] ^= 0x01;
    ExpectDataLoss(t, "CRC mismatch");
  }
}

TEST(DynamicIndexTest, DecodeRejectsEveryFlippedHeaderByte) {
  Bytes file = MakeIndex({5, 6}).Encode();
  for (size_t pos = 0; pos < kDynamicIndexHeaderSize; ++pos) {
    Bytes t = file;
    t[pos] ^= 0x10;
    ASSERT_EQ(CodeOf(DynamicIndex::Decode(t)), StatusCode::kDataLoss) << pos;
  }
}

TEST(DynamicIndexTest, DecodeRejectsOtherVersions) {
  Bytes file = MakeIndex({5}).Encode();
  for (uint16_t v : {0, 2, 0xffff}) {
    Bytes t = file;
    format::PutU16(t.data() + kOffVersion, v);
    Reseal(t);
    ExpectDataLoss(t, "version");
  }
}

TEST(DynamicIndexTest, DecodeRejectsNonZeroReservedBytesEvenWithValidCrc) {
  Bytes file = MakeIndex({5}).Encode();
  for (size_t pos : {size_t{10}, size_t{12}, size_t{15}, size_t{68}, size_t{1000},
                     kDynamicIndexHeaderSize - 1}) {
    Bytes t = file;
    t[pos] = 1;
    Reseal(t);
    ExpectDataLoss(t, "reserved");
  }
}

TEST(DynamicIndexTest, DecodeRejectsCountAgainstFileSize) {
  Bytes file = MakeIndex({5, 6, 7}).Encode();
  for (uint64_t count : {uint64_t{0}, uint64_t{2}, uint64_t{4}}) {
    Bytes t = file;
    format::PutU64(t.data() + kOffCount, count);
    Reseal(t);
    ExpectDataLoss(t, "bytes of entries");
  }
  // A file one entry short while the header still counts three.
  Bytes t(file.begin(), file.end() - kDynamicIndexEntrySize);
  Reseal(t);
  ExpectDataLoss(t, "bytes of entries");
  // Huge counts must not make the decoder allocate or overflow.
  for (uint64_t count :
       {uint64_t{64} << 20 | 1, ~uint64_t{0} / kDynamicIndexEntrySize + 1, ~uint64_t{0}}) {
    Bytes h = file;
    format::PutU64(h.data() + kOffCount, count);
    Reseal(h);
    EXPECT_EQ(CodeOf(DynamicIndex::Decode(h)), StatusCode::kDataLoss) << count;
  }
}

TEST(DynamicIndexTest, DecodeRejectsEndsNotIncreasing) {
  Bytes file = MakeIndex({5, 6, 7}).Encode();
  Bytes t = file;
  format::PutU64(EntryAt(t, 1), 4);  // before the end of entry 0
  Reseal(t);
  ExpectDataLoss(t, "entry 1 ends at 4 after 5");
  t = file;
  format::PutU64(EntryAt(t, 0), 20);  // entry 0 past entry 1
  Reseal(t);
  ExpectDataLoss(t, "entry 1 ends at 11 after 20");
}

TEST(DynamicIndexTest, DecodeRejectsZeroLengthChunk) {
  Bytes file = MakeIndex({5, 6, 7}).Encode();
  Bytes t = file;
  format::PutU64(EntryAt(t, 1), 5);  // entry 1 as long as nothing
  Reseal(t);
  ExpectDataLoss(t, "entry 1 ends at 5 after 5");
  t = MakeIndex({5}).Encode();
  format::PutU64(EntryAt(t, 0), 0);  // the first chunk empty
  format::PutU64(t.data() + kOffStreamSize, 0);
  Reseal(t);
  ExpectDataLoss(t, "entry 0 ends at 0");
}

TEST(DynamicIndexTest, DecodeRejectsChunkLongerThanMaxRawSize) {
  // Exactly kMaxRawSize is fine; one byte more is not.
  CAIRN_EXPECT_OK(DynamicIndex::Decode(MakeIndex({3, blob::kMaxRawSize}).Encode()));
  Bytes t = MakeIndex({3, blob::kMaxRawSize}).Encode();
  format::PutU64(EntryAt(t, 1), 3 + uint64_t{blob::kMaxRawSize} + 1);
  format::PutU64(t.data() + kOffStreamSize, 3 + uint64_t{blob::kMaxRawSize} + 1);
  Reseal(t);
  ExpectDataLoss(t, "chunks must be 1 to");
  t = MakeIndex({1}).Encode();
  format::PutU64(EntryAt(t, 0), uint64_t{blob::kMaxRawSize} + 1);
  format::PutU64(t.data() + kOffStreamSize, uint64_t{blob::kMaxRawSize} + 1);
  Reseal(t);
  ExpectDataLoss(t, "entry 0 ends at");
}

TEST(DynamicIndexTest, DecodeRejectsStreamSizeMismatch) {
  Bytes file = MakeIndex({5, 6}).Encode();
  for (uint64_t size : {uint64_t{0}, uint64_t{10}, uint64_t{12}, ~uint64_t{0}}) {
    Bytes t = file;
    format::PutU64(t.data() + kOffStreamSize, size);
    Reseal(t);
    ExpectDataLoss(t, "header says");
  }
  Bytes empty = DynamicIndex().Encode();
  format::PutU64(empty.data() + kOffStreamSize, 1);
  Reseal(empty);
  ExpectDataLoss(empty, "entries end at 0");
}

TEST(DynamicIndexTest, DecodeRejectsFlippedEntryBytes) {
  Bytes file = MakeIndex({5, 6, 7}).Encode();
  // Only the checksum protects the digests: every flipped digest byte must
  // be caught by it.
  for (size_t i = 0; i < 3; ++i) {
    for (size_t off = 8; off < kDynamicIndexEntrySize; off += 5) {
      Bytes t = file;
      EntryAt(t, i)[off] ^= 0x01;
      ExpectDataLoss(t, "checksum mismatch");
    }
  }
  // An end changed consistently (ends still increase, size matches) is
  // still caught by the checksum.
  Bytes t = file;
  format::PutU64(EntryAt(t, 0), 4);
  ExpectDataLoss(t, "checksum mismatch");
  // The stored checksum itself damaged, header CRC resealed.
  t = file;
  t[kOffCsum + 3] ^= 0x80;
  format::PutU32(t.data() + kOffHeaderCrc, format::Crc32c(ByteSpan(t.data(), 64)));
  ExpectDataLoss(t, "checksum mismatch");
}

TEST(DynamicIndexTest, ReadDynamicIndexNamesThePath) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  std::string path = dir.Join("root.tree.data.didx");
  DynamicIndex idx = MakeIndex({5, 6, 7});
  test_util::WriteFileOrFail(path, idx.Encode());
  auto back = ReadDynamicIndex(*env, path);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->csum(), idx.csum());
  EXPECT_EQ(back->size(), 18u);

  Bytes file = idx.Encode();
  file.pop_back();
  test_util::WriteFileOrFail(path, file);
  auto bad = ReadDynamicIndex(*env, path);
  EXPECT_EQ(CodeOf(bad), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(path), std::string_view::npos);
  EXPECT_EQ(CodeOf(ReadDynamicIndex(*env, dir.Join("missing.didx"))), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::index
