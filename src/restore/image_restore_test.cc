#include "restore/image_restore.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::restore {
namespace {

using test_util::CodeOf;

constexpr uint32_t kChunk = index::kMinChunkSize;  // 64 KiB

// An in-memory ChunkSource. Thread-safe: restore may read concurrently.
// Made asynchronous (SetAsync), each ReadIntoAsync completes on a thread of
// its own, as an object store's reads complete on its client's thread.
class MapSource : public store::ChunkSource {
 public:
  void SetAsync() { async_ = true; }
  bool ReadsAsync() const override { return async_; }
  void ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                     std::function<void(Status)> done) override {
    threads_.Run([this, id, out, done = std::move(done)] { done(ReadInto(id, out)); });
  }

  Result<Bytes> Read(const store::ChunkId& id) override {
    std::lock_guard lock(mu_);
    ++reads_[id];
    auto it = chunks_.find(id);
    if (it == chunks_.end()) {
      return NotFoundError("chunk " + crypto::DigestHex(id) + " missing from test source");
    }
    return it->second;
  }
  store::SourceTraits Traits() const override {
    return store::SourceTraits{store::MediumKind::kMemory, 4, "test source"};
  }

  void Put(const store::ChunkId& id, Bytes stored) {
    std::lock_guard lock(mu_);
    chunks_[id] = std::move(stored);
  }
  void Erase(const store::ChunkId& id) {
    std::lock_guard lock(mu_);
    chunks_.erase(id);
  }
  int ReadsOf(const store::ChunkId& id) {
    std::lock_guard lock(mu_);
    return reads_[id];
  }
  int TotalReads() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [id, count] : reads_) n += count;
    return n;
  }

 private:
  std::mutex mu_;
  std::map<store::ChunkId, Bytes> chunks_;
  std::map<store::ChunkId, int> reads_;
  bool async_ = false;
  test_util::ThreadPerRead threads_;  // last: joined before the rest goes
};

// Cuts `image` into chunks, stores each in `source` and returns the index.
index::FixedIndex StoreImage(const Bytes& image, MapSource& source, uint32_t chunk = kChunk) {
  std::vector<crypto::Digest> ids;
  for (uint64_t off = 0; off < image.size(); off += chunk) {
    ByteSpan plain(image.data() + off, std::min<uint64_t>(chunk, image.size() - off));
    crypto::Digest id = crypto::Sha256(plain);
    auto stored = blob::Encode(plain);
    EXPECT_TRUE(stored.ok());
    source.Put(id, *stored);
    ids.push_back(id);
  }
  return index::FixedIndex(image.size(), chunk, std::move(ids));
}

// Layout: [0]=A [1]=zero [2]=B [3]=A [4]=zero [5]=compressible [6]=A [7..]=tail of 777 bytes.
Bytes MakeImage() {
  Bytes a = test_util::RandomBytes(kChunk, 1);
  Bytes b = test_util::RandomBytes(kChunk, 2);
  Bytes c(kChunk);
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>(i % 7);
  Bytes zero(kChunk, 0);
  Bytes tail = test_util::RandomBytes(777, 3);
  Bytes image;
  for (const Bytes* p : {&a, &zero, &b, &a, &zero, &c, &a, &tail}) {
    image.insert(image.end(), p->begin(), p->end());
  }
  return image;
}

// Runs `fn` with standard output sent to `path`.
template <typename Fn>
Status WithStdoutTo(const std::string& path, Fn fn) {
  std::fflush(stdout);
  int saved = ::dup(STDOUT_FILENO);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
  Status s = fn();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  return s;
}

std::vector<uint64_t> Offsets(const PlanItem& item) {
  std::vector<uint64_t> offsets;
  for (const Use& use : item.uses) offsets.push_back(use.offset);
  return offsets;
}

class ImageRestoreTest : public ::testing::Test {
 protected:
  Status Restore(const index::FixedIndex& idx, store::ChunkSource& source,
                 const std::string& target, bool overwrite = false) {
    ImageRestoreOptions options;
    options.overwrite = overwrite;
    stats_ = ImageRestoreStats{};
    return RestoreImage(*env_, idx, source, target, options, &stats_);
  }

  std::vector<std::string> DirEntries() {
    auto names = env_->ListDir(dir_.path());
    EXPECT_TRUE(names.ok());
    return names.ok() ? *names : std::vector<std::string>{};
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  ImageRestoreStats stats_;
};

TEST(PlanImageRestoreTest, DistinctIdsOnceWithAllOffsetsZerosApart) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  RestorePlan plan = PlanImageRestore(idx);

  ASSERT_EQ(plan.items.size(), 4u);  // A, B, C, tail; in first-use order
  EXPECT_EQ(plan.items[0].id, idx.digest(0));
  EXPECT_EQ(Offsets(plan.items[0]), (std::vector<uint64_t>{0, 3 * kChunk, 6 * kChunk}));
  EXPECT_EQ(plan.items[0].length, kChunk);
  EXPECT_EQ(plan.items[1].id, idx.digest(2));
  EXPECT_EQ(Offsets(plan.items[1]), (std::vector<uint64_t>{2 * kChunk}));
  EXPECT_EQ(Offsets(plan.items[2]), (std::vector<uint64_t>{5 * kChunk}));
  EXPECT_EQ(Offsets(plan.items[3]), (std::vector<uint64_t>{7 * kChunk}));
  EXPECT_EQ(plan.items[3].length, 777u);
  ASSERT_EQ(plan.zero_ranges.size(), 2u);
  EXPECT_EQ(plan.zero_ranges[0].offset, kChunk);
  EXPECT_EQ(plan.zero_ranges[1].offset, 4 * kChunk);
  EXPECT_EQ(plan.zero_ranges[1].length, kChunk);
  for (const auto& item : plan.items) EXPECT_NE(item.id, index::ZeroChunkDigest(kChunk));
}

TEST(PlanImageRestoreTest, EmptyAndAllZeroImages) {
  RestorePlan empty = PlanImageRestore(index::FixedIndex(0, kChunk, {}));
  EXPECT_TRUE(empty.items.empty());
  EXPECT_TRUE(empty.zero_ranges.empty());

  std::vector<crypto::Digest> zeros(5, index::ZeroChunkDigest(kChunk));
  RestorePlan all_zero = PlanImageRestore(index::FixedIndex(5 * kChunk, kChunk, zeros));
  EXPECT_TRUE(all_zero.items.empty());
  ASSERT_EQ(all_zero.zero_ranges.size(), 5u);
  uint64_t covered = 0;
  for (const ZeroRange& z : all_zero.zero_ranges) covered += z.length;
  EXPECT_EQ(covered, 5u * kChunk);
}

TEST_F(ImageRestoreTest, NewFileIsByteIdenticalAndEachIdReadOnce) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("restored.raw");
  CAIRN_ASSERT_OK(Restore(idx, source, target));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);
  EXPECT_EQ(stats_.bytes, image.size());
  EXPECT_EQ(stats_.chunks_fetched, 4u);
  EXPECT_EQ(stats_.zero_chunks, 2u);
  EXPECT_EQ(source.ReadsOf(idx.digest(0)), 1);  // A is used three times, read once
  EXPECT_EQ(source.ReadsOf(index::ZeroChunkDigest(kChunk)), 0);  // zeros are never fetched
  EXPECT_EQ(DirEntries(), std::vector<std::string>{"restored.raw"});  // no .partial left
}

// A source that reads asynchronously goes through the pipeline's
// asynchronous I/O stage: the same file, the same stream, and a missing
// chunk is still DataLoss that names it.
TEST_F(ImageRestoreTest, AsyncSourceRestoresTheSameAndMissingIsDataLoss) {
  MapSource source;
  source.SetAsync();
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("restored.raw");
  CAIRN_ASSERT_OK(Restore(idx, source, target));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);
  EXPECT_EQ(stats_.chunks_fetched, 4u);
  EXPECT_EQ(source.ReadsOf(idx.digest(0)), 1);
  std::string out = dir_.Join("stdout.raw");
  CAIRN_ASSERT_OK(WithStdoutTo(out, [&] { return Restore(idx, source, "-"); }));
  EXPECT_EQ(test_util::ReadFileOrFail(out), image);

  source.Erase(idx.digest(2));
  Status s = Restore(idx, source, dir_.Join("x.raw"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find(crypto::DigestHex(idx.digest(2))), std::string_view::npos);
}

TEST_F(ImageRestoreTest, EmptyImage) {
  MapSource source;
  std::string target = dir_.Join("empty.raw");
  CAIRN_ASSERT_OK(Restore(index::FixedIndex(0, kChunk, {}), source, target));
  auto info = env_->Stat(target);
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->size, 0u);
  EXPECT_EQ(source.TotalReads(), 0);
}

TEST_F(ImageRestoreTest, ZeroChunksStayHoles) {
  // 64 chunks (4 MiB), only 2 with data.
  Bytes image(64 * kChunk, 0);
  Bytes data = test_util::RandomBytes(kChunk, 5);
  std::copy(data.begin(), data.end(), image.begin() + 10 * kChunk);
  std::copy(data.begin(), data.end(), image.begin() + 50 * kChunk + 0);
  image[50 * kChunk] ^= 1;
  MapSource source;
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("sparse.raw");
  CAIRN_ASSERT_OK(Restore(idx, source, target));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);
  EXPECT_EQ(stats_.zero_chunks, 62u);
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), image.size());
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, image.size() / 4)
      << "zero chunks were written instead of left as holes";
}

TEST_F(ImageRestoreTest, ExistingTargetNeedsOverwrite) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("existing.raw");
  Bytes old = test_util::RandomBytes(image.size() + 12345, 77);  // larger, no zeros
  test_util::WriteFileOrFail(target, old);

  Status s = Restore(idx, source, target);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("--overwrite"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(test_util::ReadFileOrFail(target), old);

  CAIRN_ASSERT_OK(Restore(idx, source, target, /*overwrite=*/true));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);  // zeros written, size trimmed

  Bytes small = test_util::RandomBytes(100, 78);  // and a smaller target grows
  test_util::WriteFileOrFail(target, small);
  CAIRN_ASSERT_OK(Restore(idx, source, target, /*overwrite=*/true));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);

  EXPECT_EQ(CodeOf(Restore(idx, source, dir_.path(), /*overwrite=*/true)),
            StatusCode::kInvalidArgument);  // a directory
}

// A source whose reads all return one kind of damage.
class DamagedSource final : public MapSource {
 public:
  enum class Damage { kBitFlip, kTruncate, kOtherContent, kUnavailable };
  explicit DamagedSource(Damage damage) : damage_(damage) {}

  Result<Bytes> Read(const store::ChunkId& id) override {
    CAIRN_ASSIGN_OR_RETURN(Bytes stored, MapSource::Read(id));
    switch (damage_) {
      case Damage::kBitFlip:
        stored[stored.size() - 1] ^= 0x01;
        return stored;
      case Damage::kTruncate:
        stored.resize(stored.size() / 2);
        return stored;
      case Damage::kOtherContent: {
        auto other = blob::Encode(test_util::RandomBytes(kChunk, 1234));
        return other;
      }
      case Damage::kUnavailable:
        return UnavailableError("test source: connection reset");
    }
    return InternalError("unreachable");
  }

 private:
  Damage damage_;
};

TEST_F(ImageRestoreTest, DamagedChunksFailWithoutLeavingATarget) {
  const std::pair<DamagedSource::Damage, StatusCode> cases[] = {
      {DamagedSource::Damage::kBitFlip, StatusCode::kDataLoss},
      {DamagedSource::Damage::kTruncate, StatusCode::kDataLoss},
      {DamagedSource::Damage::kOtherContent, StatusCode::kDataLoss},
      {DamagedSource::Damage::kUnavailable, StatusCode::kUnavailable},
  };
  Bytes image = MakeImage();
  for (const auto& [damage, code] : cases) {
    DamagedSource source(damage);
    index::FixedIndex idx = StoreImage(image, source);
    std::string target = dir_.Join("never.raw");
    Status s = Restore(idx, source, target);
    EXPECT_EQ(s.code(), code) << static_cast<int>(damage) << " " << s.ToString();
    EXPECT_TRUE(DirEntries().empty()) << "left behind: " << DirEntries()[0];
  }
}

TEST_F(ImageRestoreTest, DamageMessageNamesTheChunk) {
  DamagedSource source(DamagedSource::Damage::kBitFlip);
  Bytes image = test_util::RandomBytes(kChunk, 9);  // one chunk
  index::FixedIndex idx = StoreImage(image, source);
  Status s = Restore(idx, source, dir_.Join("x.raw"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(crypto::DigestHex(idx.digest(0))), std::string_view::npos)
      << s.ToString();
}

TEST_F(ImageRestoreTest, MissingChunkIsDataLoss) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  source.Erase(idx.digest(2));
  Status s = Restore(idx, source, dir_.Join("x.raw"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find(crypto::DigestHex(idx.digest(2))), std::string_view::npos);
  EXPECT_TRUE(DirEntries().empty());
}

TEST_F(ImageRestoreTest, ChunkOfTheWrongLengthIsDataLoss) {
  // The index claims a 1000-byte last chunk, but that id's chunk has 64 KiB.
  MapSource source;
  Bytes full = test_util::RandomBytes(kChunk, 11);
  crypto::Digest id = crypto::Sha256(full);
  source.Put(id, *blob::Encode(full));
  index::FixedIndex idx(kChunk + 1000, kChunk, {id, id});
  Status s = Restore(idx, source, dir_.Join("x.raw"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_TRUE(DirEntries().empty());
  // The same onto an existing file.
  std::string existing = dir_.Join("existing.raw");
  test_util::WriteFileOrFail(existing, Bytes(10, 1));
  index::FixedIndex three(2 * kChunk + 1000, kChunk, {id, id, id});
  EXPECT_EQ(Restore(three, source, existing, /*overwrite=*/true).code(), StatusCode::kDataLoss);
}

TEST_F(ImageRestoreTest, StreamChunkOfTheWrongLengthIsDataLoss) {
  MapSource source;
  Bytes full = test_util::RandomBytes(kChunk, 11);
  crypto::Digest id = crypto::Sha256(full);
  source.Put(id, *blob::Encode(full));
  index::FixedIndex idx(kChunk + 1000, kChunk, {id, id});
  std::string out = dir_.Join("stdout.raw");
  Status s = WithStdoutTo(out, [&] { return Restore(idx, source, "-"); });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_LE(test_util::ReadFileOrFail(out).size(), idx.image_size());
}

TEST_F(ImageRestoreTest, FailedOverwriteReportsTheError) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  source.Erase(idx.digest(5));
  std::string target = dir_.Join("existing.raw");
  test_util::WriteFileOrFail(target, Bytes(10, 1));
  EXPECT_EQ(Restore(idx, source, target, /*overwrite=*/true).code(), StatusCode::kDataLoss);
}

TEST_F(ImageRestoreTest, StreamToStdoutIsInOrderWithZeros) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string out = dir_.Join("stdout.raw");
  CAIRN_ASSERT_OK(WithStdoutTo(out, [&] { return Restore(idx, source, "-"); }));
  EXPECT_EQ(test_util::ReadFileOrFail(out), image);
  EXPECT_EQ(stats_.zero_chunks, 2u);
}

TEST_F(ImageRestoreTest, StreamStopsAtDamage) {
  DamagedSource source(DamagedSource::Damage::kBitFlip);
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string out = dir_.Join("stdout.raw");
  Status s = WithStdoutTo(out, [&] { return Restore(idx, source, "-"); });
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  // Whatever was written before the error is a prefix of the image, never wrong bytes.
  Bytes written = test_util::ReadFileOrFail(out);
  ASSERT_LE(written.size(), image.size());
  EXPECT_TRUE(std::equal(written.begin(), written.end(), image.begin()));
}

// Writes `data` to a new file at `path`.
void WriteFile(const std::string& path, const Bytes& data) {
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fwrite(data.data(), 1, data.size(), f), data.size());
  std::fclose(f);
}

uint64_t AccountedBytes(const ImageRestoreStats& s) {
  return s.fetched_bytes + s.dedup_bytes + s.zero_bytes + s.in_place_bytes;
}

TEST(PlanImageRestoreTest, SharedIdsAcrossTargetsAreOneItem) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex one = StoreImage(image, source);
  index::FixedIndex two = StoreImage(image, source);
  const index::FixedIndex* both[] = {&one, &two};
  RestorePlan plan = PlanImageRestore(both);
  ASSERT_EQ(plan.items.size(), 4u);
  ASSERT_EQ(plan.items[0].uses.size(), 6u);  // A three times in each
  EXPECT_EQ(plan.items[0].uses[0].target, 0u);
  EXPECT_EQ(plan.items[0].uses[3].target, 1u);
  EXPECT_EQ(plan.zero_ranges.size(), 4u);
  EXPECT_EQ(plan.zero_ranges[2].target, 1u);
}

TEST(PlanImageRestoreTest, WantedSelectsPositions) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  const index::FixedIndex* one[] = {&idx};
  std::vector<std::vector<uint8_t>> wanted = {{0, 1, 0, 1, 0, 0, 0, 1}};
  RestorePlan plan = PlanImageRestore(one, &wanted);
  ASSERT_EQ(plan.items.size(), 2u);  // A (at 3 only) and the tail
  EXPECT_EQ(Offsets(plan.items[0]), (std::vector<uint64_t>{3 * kChunk}));
  ASSERT_EQ(plan.zero_ranges.size(), 1u);
  EXPECT_EQ(plan.zero_ranges[0].offset, kChunk);
}

TEST_F(ImageRestoreTest, SeveralTargetsShareFetchesAndAccountEveryByte) {
  MapSource source;
  Bytes image = MakeImage();
  Bytes other = test_util::RandomBytes(3 * kChunk + 5, 9);
  std::copy(image.begin(), image.begin() + kChunk, other.begin() + kChunk);  // A again
  index::FixedIndex first = StoreImage(image, source);
  index::FixedIndex second = StoreImage(other, source);
  const ImageTarget targets[] = {{&first, dir_.Join("a.raw")}, {&second, dir_.Join("b.raw")}};
  std::vector<ImageRestoreStats> stats;
  CAIRN_ASSERT_OK(RestoreImages(*env_, targets, source, ImageRestoreOptions{}, &stats));
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("a.raw")), image);
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("b.raw")), other);
  EXPECT_EQ(source.ReadsOf(first.digest(0)), 1);  // A: three uses in a, one in b
  ASSERT_EQ(stats.size(), 2u);
  EXPECT_EQ(stats[1].dedup_bytes, kChunk);
  EXPECT_EQ(stats[0].dedup_bytes, 2u * kChunk);
  for (const auto& s : stats) EXPECT_EQ(AccountedBytes(s), s.bytes);
  EXPECT_EQ(stats[0].zero_bytes, 2u * kChunk);
  EXPECT_EQ(stats[0].written_bytes, image.size() - 2 * kChunk);  // holes not written
}

TEST_F(ImageRestoreTest, SeveralTargetsFailTogether) {
  MapSource source;
  Bytes image = MakeImage();
  Bytes other = test_util::RandomBytes(2 * kChunk, 9);
  index::FixedIndex first = StoreImage(image, source);
  index::FixedIndex second = StoreImage(other, source);
  source.Erase(second.digest(1));
  const ImageTarget targets[] = {{&first, dir_.Join("a.raw")}, {&second, dir_.Join("b.raw")}};
  std::vector<ImageRestoreStats> stats;
  EXPECT_EQ(CodeOf(RestoreImages(*env_, targets, source, ImageRestoreOptions{}, &stats)),
            StatusCode::kDataLoss);
  EXPECT_TRUE(DirEntries().empty());  // neither target, no .partial
}

TEST_F(ImageRestoreTest, InPlaceRewritesOnlyWhatDiffers) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("disk.raw");
  Bytes stale = image;
  stale[2 * kChunk + 5] ^= 0xff;  // B differs
  stale[4 * kChunk + 9] = 1;      // a zero chunk is dirty
  stale.resize(stale.size() - 100);  // the tail is short
  WriteFile(target, stale);
  ImageRestoreOptions options;
  options.in_place = true;
  pipeline::Progress progress;
  options.progress = &progress;
  CAIRN_ASSERT_OK(RestoreImage(*env_, idx, source, target, options, &stats_));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);
  EXPECT_EQ(source.ReadsOf(idx.digest(0)), 0);  // A was right everywhere
  EXPECT_EQ(source.TotalReads(), 2);            // B and the tail
  EXPECT_EQ(stats_.fetched_bytes, kChunk + 777u);
  EXPECT_EQ(stats_.zero_bytes, kChunk);  // the dirty zero chunk, written as zeros
  EXPECT_EQ(stats_.written_bytes, 2u * kChunk + 777);
  EXPECT_EQ(stats_.in_place_bytes, image.size() - 2 * kChunk - 777);
  EXPECT_EQ(stats_.scanned_bytes, image.size());
  EXPECT_EQ(AccountedBytes(stats_), stats_.bytes);
  EXPECT_EQ(progress.done_bytes.load(), progress.total_bytes.load());

  // Again: everything is in place now.
  CAIRN_ASSERT_OK(RestoreImage(*env_, idx, source, target, options, &stats_));
  EXPECT_EQ(stats_.in_place_bytes, image.size());
  EXPECT_EQ(stats_.written_bytes, 0u);
  EXPECT_EQ(source.TotalReads(), 2);
}

TEST_F(ImageRestoreTest, InPlaceShrinksALongerTargetAndNeedsAnExistingOne) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("disk.raw");
  Bytes longer = image;
  longer.resize(image.size() + 3 * kChunk, 0x5a);
  WriteFile(target, longer);
  ImageRestoreOptions options;
  options.in_place = true;
  CAIRN_ASSERT_OK(RestoreImage(*env_, idx, source, target, options, &stats_));
  EXPECT_EQ(test_util::ReadFileOrFail(target), image);
  EXPECT_EQ(source.TotalReads(), 0);
  EXPECT_EQ(CodeOf(RestoreImage(*env_, idx, source, dir_.Join("absent"), options, &stats_)),
            StatusCode::kNotFound);
}

TEST_F(ImageRestoreTest, RehearsalChecksEverythingAndWritesNothing) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  ImageRestoreOptions options;
  options.rehearse = true;
  CAIRN_ASSERT_OK(RestoreImage(*env_, idx, source, dir_.Join("never.raw"), options, &stats_));
  EXPECT_TRUE(DirEntries().empty());
  EXPECT_EQ(source.TotalReads(), 4);
  EXPECT_EQ(stats_.written_bytes, 0u);
  EXPECT_EQ(AccountedBytes(stats_), image.size());

  // Damage is found as in a real restore.
  Bytes bad = *source.Read(idx.digest(2));
  bad[bad.size() - 1] ^= 1;
  source.Put(idx.digest(2), bad);
  EXPECT_EQ(CodeOf(RestoreImage(*env_, idx, source, "", options, &stats_)), StatusCode::kDataLoss);
}

TEST_F(ImageRestoreTest, RehearsedInPlaceLeavesTheTargetAlone) {
  MapSource source;
  Bytes image = MakeImage();
  index::FixedIndex idx = StoreImage(image, source);
  std::string target = dir_.Join("disk.raw");
  Bytes stale = image;
  stale[5] ^= 1;
  WriteFile(target, stale);
  ImageRestoreOptions options;
  options.in_place = true;
  options.rehearse = true;
  CAIRN_ASSERT_OK(RestoreImage(*env_, idx, source, target, options, &stats_));
  EXPECT_EQ(test_util::ReadFileOrFail(target), stale);
  EXPECT_EQ(stats_.fetched_bytes, kChunk);  // A, for its one stale use
  EXPECT_EQ(stats_.in_place_bytes, image.size() - kChunk);
}

}  // namespace
}  // namespace cairn::restore
