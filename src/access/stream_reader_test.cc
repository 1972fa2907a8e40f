#include "access/stream_reader.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "access/test_source.h"
#include "tests/unit_test_util.h"

namespace cairn::access {
namespace {

using test_util::CodeOf;
using test_util::RandomBytes;

constexpr uint32_t kChunk = 256u << 10;
constexpr size_t kCount = 48;

// An image of kCount chunks, some of them zero, in a TestSource.
class StreamReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    image_.resize(kCount * kChunk - 1000);  // a short tail
    std::vector<crypto::Digest> ids;
    for (size_t i = 0; i < kCount; ++i) {
      const size_t start = i * kChunk;
      const size_t len = std::min<size_t>(kChunk, image_.size() - start);
      Bytes plain = zero_.count(i) ? Bytes(len, 0) : RandomBytes(len, 100 + i);
      std::copy(plain.begin(), plain.end(), image_.begin() + static_cast<ptrdiff_t>(start));
      ids.push_back(zero_.count(i) ? blob::ChunkId(plain, nullptr) : source_.Add(plain, i % 2 == 0));
    }
    index_ = index::FixedIndex(image_.size(), kChunk, ids);
  }

  std::unique_ptr<StreamReader> Open(ChunkCache& cache, bool readahead = true,
                                     uint64_t window = 4 * kChunk) {
    StreamReaderOptions o;
    o.cache = &cache;
    o.source = &source_;
    o.description = "archive disk0.img of vm/1/T";
    o.readahead.enabled = readahead;
    o.readahead.max_window_bytes = window;
    o.readahead.cpu_workers = 2;
    return std::make_unique<StreamReader>(MapImage(index_, nullptr), o);
  }

  bool Matches(uint64_t offset, const Bytes& got) const {
    return std::equal(got.begin(), got.end(), image_.begin() + static_cast<ptrdiff_t>(offset));
  }

  // Reads the whole image in 64 KiB pieces; every piece matches the image
  // except those of chunk `bad`, which fail with `code`. Returns how many failed.
  int ReadAllFailing(StreamReader& r, uint64_t bad, StatusCode code = StatusCode::kDataLoss) {
    int failed = 0;
    for (uint64_t off = 0; off < image_.size(); off += 64u << 10) {
      Bytes got(std::min<uint64_t>(64u << 10, image_.size() - off));
      Status s = r.Read(off, got);
      if (!s.ok()) {
        EXPECT_EQ(off / kChunk, bad);
        EXPECT_EQ(s.code(), code) << s.ToString();
        ++failed;
      } else {
        EXPECT_TRUE(Matches(off, got)) << off;
      }
    }
    return failed;
  }

  const std::set<size_t> zero_ = {5, 6, 20};
  TestSource source_;
  Bytes image_;
  index::FixedIndex index_;
};

TEST_F(StreamReaderTest, ReadsAnyRangeAcrossChunksAndTheTail) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache, /*readahead=*/false);
  ASSERT_EQ(r->size(), image_.size());
  std::mt19937_64 rng(1);
  for (int i = 0; i < 200; ++i) {
    uint64_t off = rng() % image_.size();
    uint64_t len = std::min<uint64_t>(rng() % (3 * kChunk), image_.size() - off);
    Bytes got(len);
    CAIRN_ASSERT_OK(r->Read(off, got));
    ASSERT_TRUE(Matches(off, got)) << "offset " << off << " length " << len;
  }
  Bytes tail(1000);
  CAIRN_ASSERT_OK(r->Read(image_.size() - 1000, tail));
  EXPECT_TRUE(Matches(image_.size() - 1000, tail));
  Bytes past(2);
  EXPECT_EQ(CodeOf(r->Read(image_.size() - 1, past)), StatusCode::kOutOfRange);
}

TEST_F(StreamReaderTest, RandomReadsFetchOnlyTheChunksTheyTouch) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache);  // readahead on: random reads must not start it
  std::set<size_t> touched;
  // 4 KiB reads in a scattered order: no read lands near one of the last
  // eight (23 chunks on, modulo 48, at 4 KiB steps within the chunk).
  for (uint64_t i = 0; i < 40; ++i) {
    uint64_t off = (i * 23 % kCount) * kChunk + (i * 4096) % (kChunk - 4096);
    Bytes got(4096);
    CAIRN_ASSERT_OK(r->Read(off, got));
    ASSERT_TRUE(Matches(off, got));
    size_t c = off / kChunk;
    if (!zero_.count(c)) touched.insert(c);
  }
  EXPECT_EQ(source_.TotalReads(), static_cast<int>(touched.size()));
  EXPECT_EQ(r->stats().readahead.queued_chunks, 0u);
}

TEST_F(StreamReaderTest, ZeroChunksAreNeverFetched) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache, false);
  Bytes got(2 * kChunk);
  CAIRN_ASSERT_OK(r->Read(5 * kChunk, got));
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](uint8_t b) { return b == 0; }));
  EXPECT_EQ(source_.TotalReads(), 0);
}

TEST_F(StreamReaderTest, ASequentialReaderIsReadAheadAndEachChunkFetchedOnce) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache);
  constexpr uint64_t kPiece = 64u << 10;
  for (uint64_t off = 0; off < image_.size(); off += kPiece) {
    Bytes got(std::min<uint64_t>(kPiece, image_.size() - off));
    CAIRN_ASSERT_OK(r->Read(off, got));
    ASSERT_TRUE(Matches(off, got)) << off;
  }
  auto s = r->stats();
  EXPECT_EQ(s.readahead.streams, 1u);
  EXPECT_GT(s.readahead.queued_chunks, kCount / 2);
  // Demand reads and readahead never fetched a chunk twice.
  for (size_t i = 0; i < kCount; ++i) {
    if (!zero_.count(i)) {
      EXPECT_EQ(source_.ReadsOf(index_.digest(i)), 1) << "chunk " << i;
    }
  }
}

TEST_F(StreamReaderTest, ReadaheadFetchesTheWindowAheadOfASequentialReaderAndNoMore) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  source_.SetDelay(std::chrono::milliseconds(1));
  auto r = Open(cache, true, 4 * kChunk);
  // Three reads in a row make the stream sequential.
  for (uint64_t off = 0; off < 3 * (64u << 10); off += 64u << 10) {
    Bytes got(64u << 10);
    CAIRN_ASSERT_OK(r->Read(off, got));
  }
  // The window (4 chunks past where the reads reached) arrives without
  // another read: wait for it (a condition, not a time).
  for (size_t i = 1; i <= 4; ++i) {
    if (zero_.count(i)) continue;
    while (!cache.Contains(index_.digest(i))) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(source_.ReadsOf(index_.digest(0)), 1);  // the reader's own
  for (size_t i = 1; i <= 4; ++i) EXPECT_LE(source_.ReadsOf(index_.digest(i)), 1);
  // Nothing beyond the window was fetched.
  for (size_t i = 6; i < kCount; ++i) EXPECT_EQ(source_.ReadsOf(index_.digest(i)), 0) << i;
  auto s = r->stats();
  EXPECT_EQ(s.readahead.streams, 1u);
  EXPECT_EQ(s.readahead.fetched_chunks, 4u);
}

TEST_F(StreamReaderTest, TwoInterleavedSequentialStreamsAreBothReadAhead) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache);
  constexpr uint64_t kPiece = 64u << 10;
  const uint64_t half = 24 * uint64_t{kChunk};
  for (uint64_t off = 0; off < half; off += kPiece) {
    Bytes a(kPiece), b(std::min<uint64_t>(kPiece, image_.size() - half - off));
    CAIRN_ASSERT_OK(r->Read(off, a));
    CAIRN_ASSERT_OK(r->Read(half + off, b));
    ASSERT_TRUE(Matches(off, a) && Matches(half + off, b));
  }
  EXPECT_EQ(r->stats().readahead.streams, 2u);
}

TEST_F(StreamReaderTest, MemoryStaysWithinTheCacheWhateverTheImageSize) {
  ChunkCache cache({.capacity_bytes = 4 * kChunk});
  auto r = Open(cache, true, 2 * kChunk);
  for (uint64_t off = 0; off < image_.size(); off += 32u << 10) {
    Bytes got(std::min<uint64_t>(32u << 10, image_.size() - off));
    CAIRN_ASSERT_OK(r->Read(off, got));
    ASSERT_TRUE(Matches(off, got));
  }
  auto c = cache.stats();
  EXPECT_LE(c.peak_bytes, 4u * kChunk);
  EXPECT_GT(c.evictions, 0u);
}

TEST_F(StreamReaderTest, ACorruptChunkFailsExactlyTheReadsThatTouchIt) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache, false);
  source_.Corrupt(index_.digest(9));
  Bytes got(4096);
  auto s = r->Read(9 * uint64_t{kChunk} + 100, got);
  EXPECT_EQ(CodeOf(s), StatusCode::kDataLoss);
  EXPECT_NE(std::string(s.message()).find("chunk 9 (bytes 2359296-2621439)"), std::string::npos)
      << s.ToString();
  Bytes across(2 * kChunk);
  EXPECT_EQ(CodeOf(r->Read(8 * uint64_t{kChunk}, across)), StatusCode::kDataLoss);
  // Its neighbours, up to the last byte before it and from the first after.
  Bytes before(kChunk), after(kChunk);
  CAIRN_ASSERT_OK(r->Read(8 * uint64_t{kChunk}, before));
  CAIRN_ASSERT_OK(r->Read(10 * uint64_t{kChunk}, after));
  EXPECT_TRUE(Matches(8 * uint64_t{kChunk}, before) && Matches(10 * uint64_t{kChunk}, after));
  EXPECT_EQ(source_.ReadsOf(index_.digest(9)), 1);  // remembered as bad
  EXPECT_EQ(r->stats().failed_reads, 2u);
}

TEST_F(StreamReaderTest, ReadaheadOfACorruptChunkFailsOnlyItsReads) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  source_.Corrupt(index_.digest(30));
  auto r = Open(cache);
  EXPECT_EQ(ReadAllFailing(*r, 30), static_cast<int>(kChunk / (64u << 10)));
  EXPECT_EQ(source_.ReadsOf(index_.digest(30)), 1);
}

// A chunk the source cannot read (not a damaged one): read-ahead hands the
// read's own error to the readers of that chunk, blocking and asynchronous
// sources alike.
TEST_F(StreamReaderTest, ReadaheadOfAnUnreadableChunkFailsOnlyItsReadsWithTheReadsError) {
  for (bool async : {false, true}) {
    if (async) source_.SetAsync();
    ChunkCache cache({.capacity_bytes = 64u << 20});
    source_.Fail(index_.digest(30));
    auto r = Open(cache);
    EXPECT_EQ(ReadAllFailing(*r, 30, StatusCode::kUnavailable), static_cast<int>(kChunk / (64u << 10)))
        << (async ? "asynchronous" : "blocking");
    EXPECT_GT(r->stats().readahead.queued_chunks, kCount / 2);
  }
}

// A source that reads asynchronously (an object store) is read ahead on
// the pipeline's asynchronous I/O stage: the same bytes, each chunk fetched
// once, and a corrupt chunk still fails exactly its reads.
TEST_F(StreamReaderTest, AnAsyncSourceIsReadAheadTheSame) {
  source_.SetAsync();
  source_.Corrupt(index_.digest(30));
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache);
  EXPECT_EQ(ReadAllFailing(*r, 30), static_cast<int>(kChunk / (64u << 10)));
  EXPECT_GT(r->stats().readahead.queued_chunks, kCount / 2);
  for (size_t i = 0; i < kCount; ++i) {
    if (!zero_.count(i)) {
      EXPECT_EQ(source_.ReadsOf(index_.digest(i)), 1) << "chunk " << i;
    }
  }
}

TEST_F(StreamReaderTest, ConcurrentReadersOfOneChunkFetchItOnce) {
  ChunkCache cache({.capacity_bytes = 64u << 20});
  auto r = Open(cache, false);
  source_.Hold();
  std::atomic<int> ok{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      Bytes got(4096);
      uint64_t off = 3 * uint64_t{kChunk} + static_cast<uint64_t>(t) * 8192;
      if (r->Read(off, got).ok() && Matches(off, got)) ++ok;
    });
  }
  while (cache.stats().joins < 5) std::this_thread::yield();
  source_.Release();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_EQ(source_.TotalReads(), 1);
}

}  // namespace
}  // namespace cairn::access
