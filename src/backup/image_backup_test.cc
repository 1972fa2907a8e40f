#include "backup/image_backup.h"

#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::backup {
namespace {

using test_util::CodeOf;

constexpr uint32_t kChunk = index::kMinChunkSize;  // 64 KiB

// An in-memory ChunkSink that records what it is given.
class MemorySink final : public store::ChunkSink {
 public:
  Result<store::InsertResult> Insert(const store::ChunkId& id, ByteSpan stored) override {
    std::lock_guard lock(mu_);
    ++inserts_;
    auto [it, fresh] = chunks_.try_emplace(id, stored.begin(), stored.end());
    if (!fresh) return store::InsertResult{false, 0};
    return store::InsertResult{true, stored.size()};
  }
  Result<bool> Contains(const store::ChunkId& id) override {
    std::lock_guard lock(mu_);
    return chunks_.contains(id);
  }
  Status Flush() override { return Status::Ok(); }

  size_t size() {
    std::lock_guard lock(mu_);
    return chunks_.size();
  }
  int inserts() {
    std::lock_guard lock(mu_);
    return inserts_;
  }
  Bytes Get(const store::ChunkId& id) {
    std::lock_guard lock(mu_);
    auto it = chunks_.find(id);
    return it == chunks_.end() ? Bytes() : it->second;
  }

 private:
  std::mutex mu_;
  std::map<store::ChunkId, Bytes> chunks_;
  int inserts_ = 0;
};

// A ReadableFile over memory that can shrink after some reads, fail a read,
// or report a different size at the end.
class MemoryFile final : public ReadableFile {
 public:
  explicit MemoryFile(Bytes data) : data_(std::move(data)) {}

  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) override {
    std::lock_guard lock(mu_);
    if (++reads_ == fail_at_read_) return DataLossError("read " + path_ + ": Input/output error");
    if (reads_ == shrink_after_reads_) data_.resize(shrink_to_);
    if (offset >= data_.size()) return size_t{0};
    size_t n = std::min<size_t>(buf.size(), data_.size() - offset);
    std::copy_n(data_.begin() + static_cast<ptrdiff_t>(offset), n, buf.begin());
    return n;
  }
  Result<uint64_t> Size() override {
    std::lock_guard lock(mu_);
    return data_.size() + grow_at_end_;
  }
  const std::string& path() const override { return path_; }

  void ShrinkAfter(int reads, size_t to) {
    shrink_after_reads_ = reads;
    shrink_to_ = to;
  }
  void FailRead(int n) { fail_at_read_ = n; }
  void GrowAtEnd(uint64_t extra) { grow_at_end_ = extra; }

 private:
  std::mutex mu_;
  Bytes data_;
  std::string path_ = "/dev/test-image";
  int reads_ = 0;
  int shrink_after_reads_ = -1;
  size_t shrink_to_ = 0;
  int fail_at_read_ = -1;
  uint64_t grow_at_end_ = 0;
};

// Image of 10 chunks + 1000 bytes: zeros, random, duplicates, compressible.
//   0: zero   1: A   2: B   3: zero   4: A   5: C (compressible)   6: zero
//   7: B      8: D   9: zero  10 (1000 bytes): E
Bytes MakeImage() {
  Bytes a = test_util::RandomBytes(kChunk, 1);
  Bytes b = test_util::RandomBytes(kChunk, 2);
  Bytes c(kChunk);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(i / 100);
  Bytes d = test_util::RandomBytes(kChunk, 4);
  Bytes e = test_util::RandomBytes(1000, 5);
  Bytes zero(kChunk, 0);
  Bytes image;
  for (const Bytes* part : {&zero, &a, &b, &zero, &a, &c, &zero, &b, &d, &zero, &e}) {
    image.insert(image.end(), part->begin(), part->end());
  }
  return image;
}

ImageBackupOptions SmallChunks(int workers = 3) {
  ImageBackupOptions o;
  o.chunk_size = kChunk;
  o.workers = workers;
  return o;
}

TEST(ImageBackupTest, StatsAreExact) {
  Bytes image = MakeImage();
  MemoryFile file(image);
  MemorySink sink;
  ImageStats stats;
  auto idx = BackupImage(file, image.size(), sink, SmallChunks(), &stats);
  CAIRN_ASSERT_OK(idx);

  EXPECT_EQ(stats.bytes, image.size());
  EXPECT_EQ(stats.chunks, 11u);
  EXPECT_EQ(stats.zero_chunks, 4u);
  // Distinct: zero, A, B, C, D, E.
  EXPECT_EQ(stats.new_chunks, 6u);
  EXPECT_EQ(stats.new_bytes, 5u * kChunk + 1000);
  EXPECT_EQ(stats.reused_chunks, 5u);  // 3 zeros, A and B again
  EXPECT_EQ(stats.reused_bytes, 5u * kChunk);
  EXPECT_EQ(sink.size(), 6u);
  EXPECT_LT(stats.stored_bytes, stats.new_bytes);  // zeros and C compress

  ASSERT_EQ(idx->chunk_count(), 11u);
  EXPECT_EQ(idx->image_size(), image.size());
  EXPECT_EQ(idx->chunk_size(), kChunk);
  EXPECT_EQ(idx->ChunkLength(10), 1000u);
  for (size_t i = 0; i < idx->chunk_count(); ++i) {
    ByteSpan plain(image.data() + idx->ChunkOffset(i), idx->ChunkLength(i));
    ASSERT_EQ(idx->digest(i), crypto::Sha256(plain)) << i;
    auto decoded = blob::DecodeChunk(sink.Get(idx->digest(i)), idx->digest(i));
    CAIRN_ASSERT_OK(decoded);
  }
  EXPECT_EQ(idx->digest(0), index::ZeroChunkDigest(kChunk));
  EXPECT_EQ(idx->digest(1), idx->digest(4));
  EXPECT_EQ(idx->digest(2), idx->digest(7));
}

TEST(ImageBackupTest, SecondRunWithKnownStoresNothing) {
  Bytes image = MakeImage();
  MemorySink sink;
  MemoryFile first_file(image);
  ImageStats first;
  auto idx = BackupImage(first_file, image.size(), sink, SmallChunks(), &first);
  CAIRN_ASSERT_OK(idx);
  const int inserts = sink.inserts();

  DigestSet known(idx->digests().begin(), idx->digests().end());
  ImageBackupOptions options = SmallChunks();
  options.known = &known;
  MemoryFile second_file(image);
  ImageStats second;
  auto idx2 = BackupImage(second_file, image.size(), sink, options, &second);
  CAIRN_ASSERT_OK(idx2);
  EXPECT_EQ(idx2->digests(), idx->digests());
  EXPECT_EQ(second.new_chunks, 0u);
  EXPECT_EQ(second.new_bytes, 0u);
  EXPECT_EQ(second.stored_bytes, 0u);
  EXPECT_EQ(second.reused_chunks, 11u);
  EXPECT_EQ(second.reused_bytes, image.size());
  EXPECT_EQ(second.zero_chunks, 4u);
  EXPECT_EQ(sink.inserts(), inserts);
}

TEST(ImageBackupTest, ChunksAlreadyInTheSinkAreReused) {
  Bytes image = MakeImage();
  MemorySink sink;
  MemoryFile f1(image);
  ImageStats s1;
  CAIRN_ASSERT_OK(BackupImage(f1, image.size(), sink, SmallChunks(), &s1));
  // No `known` set: the sink's Contains() must still prevent rewrites.
  MemoryFile f2(image);
  ImageStats s2;
  CAIRN_ASSERT_OK(BackupImage(f2, image.size(), sink, SmallChunks(), &s2));
  EXPECT_EQ(s2.new_chunks, 0u);
  EXPECT_EQ(s2.reused_chunks, 11u);
  EXPECT_EQ(sink.inserts(), 6);
}

TEST(ImageBackupTest, ChangedChunkIsTheOnlyNewOne) {
  Bytes image = MakeImage();
  MemorySink sink;
  MemoryFile f1(image);
  ImageStats s1;
  auto idx = BackupImage(f1, image.size(), sink, SmallChunks(), &s1);
  CAIRN_ASSERT_OK(idx);
  DigestSet known(idx->digests().begin(), idx->digests().end());

  image[8 * kChunk + 17] ^= 0xff;  // touch chunk 8 (D)
  MemoryFile f2(image);
  ImageBackupOptions options = SmallChunks();
  options.known = &known;
  ImageStats s2;
  auto idx2 = BackupImage(f2, image.size(), sink, options, &s2);
  CAIRN_ASSERT_OK(idx2);
  EXPECT_EQ(s2.new_chunks, 1u);
  EXPECT_EQ(s2.new_bytes, kChunk);
  for (size_t i = 0; i < idx->chunk_count(); ++i) {
    EXPECT_EQ(idx2->digest(i) == idx->digest(i), i != 8) << i;
  }
}

TEST(ImageBackupTest, EmptySource) {
  MemoryFile file(Bytes{});
  MemorySink sink;
  ImageStats stats;
  auto idx = BackupImage(file, 0, sink, SmallChunks(), &stats);
  CAIRN_ASSERT_OK(idx);
  EXPECT_EQ(idx->chunk_count(), 0u);
  EXPECT_EQ(idx->image_size(), 0u);
  EXPECT_EQ(stats.chunks, 0u);
  EXPECT_EQ(sink.size(), 0u);
}

TEST(ImageBackupTest, SingleWorkerGivesTheSameIndex) {
  Bytes image = MakeImage();
  MemorySink s1, s2;
  MemoryFile f1(image), f2(image);
  ImageStats st1, st2;
  auto a = BackupImage(f1, image.size(), s1, SmallChunks(1), &st1);
  auto b = BackupImage(f2, image.size(), s2, SmallChunks(8), &st2);
  CAIRN_ASSERT_OK(a);
  CAIRN_ASSERT_OK(b);
  EXPECT_EQ(a->digests(), b->digests());
  EXPECT_EQ(st1.new_chunks, st2.new_chunks);
}

TEST(ImageBackupTest, SourceThatShrinksWhileReadIsFailedPrecondition) {
  Bytes image = MakeImage();
  MemoryFile file(image);
  file.ShrinkAfter(3, 5 * kChunk + 10);  // during the 3rd chunk read
  MemorySink sink;
  ImageStats stats;
  auto idx = BackupImage(file, image.size(), sink, SmallChunks(), &stats);
  EXPECT_EQ(CodeOf(idx), StatusCode::kFailedPrecondition);
  EXPECT_NE(idx.status().message().find("/dev/test-image"), std::string_view::npos)
      << idx.status().ToString();
}

TEST(ImageBackupTest, SourceWhoseSizeChangesIsFailedPrecondition) {
  Bytes image = MakeImage();
  MemoryFile file(image);
  file.GrowAtEnd(kChunk);  // reads complete, but the size differs at the end
  MemorySink sink;
  ImageStats stats;
  auto idx = BackupImage(file, image.size(), sink, SmallChunks(), &stats);
  EXPECT_EQ(CodeOf(idx), StatusCode::kFailedPrecondition);
  EXPECT_NE(idx.status().message().find("changed size"), std::string_view::npos);
}

TEST(ImageBackupTest, ReadErrorIsReturned) {
  Bytes image = MakeImage();
  MemoryFile file(image);
  file.FailRead(5);
  MemorySink sink;
  ImageStats stats;
  auto idx = BackupImage(file, image.size(), sink, SmallChunks(), &stats);
  EXPECT_EQ(CodeOf(idx), StatusCode::kDataLoss);
  EXPECT_NE(idx.status().message().find("Input/output error"), std::string_view::npos);
}

// A sink whose inserts fail after a number of successes (a full disk).
class FailingSink final : public store::ChunkSink {
 public:
  explicit FailingSink(int ok_inserts) : left_(ok_inserts) {}
  Result<store::InsertResult> Insert(const store::ChunkId&, ByteSpan stored) override {
    std::lock_guard lock(mu_);
    if (left_-- <= 0) return ResourceExhaustedError("No space left on device");
    return store::InsertResult{true, stored.size()};
  }
  Result<bool> Contains(const store::ChunkId&) override { return false; }
  Status Flush() override { return Status::Ok(); }

 private:
  std::mutex mu_;
  int left_;
};

TEST(ImageBackupTest, SinkErrorStopsTheBackup) {
  // Many distinct chunks, so the reader is still busy when a worker fails.
  Bytes image = test_util::RandomBytes(64 * kChunk, 9);
  MemoryFile file(image);
  FailingSink sink(3);
  ImageStats stats;
  auto idx = BackupImage(file, image.size(), sink, SmallChunks(2), &stats);
  EXPECT_EQ(CodeOf(idx), StatusCode::kResourceExhausted);
}

TEST(ImageBackupTest, RejectsInvalidChunkSizeAndHugeImages) {
  MemoryFile file(Bytes(10, 1));
  MemorySink sink;
  ImageStats stats;
  ImageBackupOptions options = SmallChunks();
  options.chunk_size = 1000;
  EXPECT_EQ(CodeOf(BackupImage(file, 10, sink, options, &stats)), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(BackupImage(file, index::kMaxImageSize + 1, sink, SmallChunks(), &stats)),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::backup
