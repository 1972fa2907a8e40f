#include "access/chunk_cache.h"

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

constexpr uint32_t kLen = 1u << 20;

// Records what is logged, to count reports.
class RecordingLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view message) override {
    std::lock_guard lock(mu_);
    lines_.emplace_back(message);
  }
  bool Enabled(LogLevel) const override { return true; }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

class ChunkCacheTest : public ::testing::Test {
 protected:
  crypto::Digest AddChunk(uint64_t seed) {
    Bytes plain = RandomBytes(kLen, seed);
    plains_[seed] = plain;
    return source_.Add(plain);
  }
  ChunkCache::Loader LoaderFor(const crypto::Digest& id) {
    return [this, id] { return LoadChunk(source_, id, kLen, nullptr); };
  }

  TestSource source_;
  std::map<uint64_t, Bytes> plains_;
};

TEST_F(ChunkCacheTest, LoadsOnceThenServesFromMemory) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  crypto::Digest id = AddChunk(1);
  for (int i = 0; i < 3; ++i) {
    auto c = cache.Get(id, LoaderFor(id));
    CAIRN_ASSERT_OK(c);
    EXPECT_TRUE(std::equal((*c)->data.begin(), (*c)->data.end(), plains_[1].begin()));
  }
  EXPECT_EQ(source_.ReadsOf(id), 1);
  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.bytes, kLen);
  EXPECT_TRUE(cache.Contains(id));
}

TEST_F(ChunkCacheTest, RawChunksAreKeptWithoutACopyAndDecodeTheSame) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  Bytes plain = RandomBytes(kLen, 9);
  crypto::Digest id = source_.Add(plain, /*compress=*/false);
  auto c = cache.Get(id, [&] { return LoadChunk(source_, id, kLen, nullptr); });
  CAIRN_ASSERT_OK(c);
  ASSERT_EQ((*c)->data.size(), kLen);
  EXPECT_TRUE(std::equal((*c)->data.begin(), (*c)->data.end(), plain.begin()));
  // The plaintext lies inside the stored buffer, after the blob header.
  EXPECT_EQ((*c)->data.data(), (*c)->buffer.data() + 64);
}

TEST_F(ChunkCacheTest, EvictsTheLeastRecentlyUsedToStayWithinCapacity) {
  ChunkCache cache({.capacity_bytes = 3 * kLen});
  std::vector<crypto::Digest> ids;
  for (uint64_t seed = 1; seed <= 4; ++seed) ids.push_back(AddChunk(seed));
  for (int i = 0; i < 3; ++i) CAIRN_ASSERT_OK(cache.Get(ids[i], LoaderFor(ids[i])));
  CAIRN_ASSERT_OK(cache.Get(ids[0], LoaderFor(ids[0])));  // 0 is now the most recent
  CAIRN_ASSERT_OK(cache.Get(ids[3], LoaderFor(ids[3])));  // evicts 1, the least recent
  EXPECT_TRUE(cache.Contains(ids[0]));
  EXPECT_FALSE(cache.Contains(ids[1]));
  EXPECT_TRUE(cache.Contains(ids[2]));
  EXPECT_TRUE(cache.Contains(ids[3]));
  auto s = cache.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.bytes, 3 * kLen);
  EXPECT_LE(s.peak_bytes, 3 * kLen);
  CAIRN_ASSERT_OK(cache.Get(ids[1], LoaderFor(ids[1])));  // loaded again
  EXPECT_EQ(source_.ReadsOf(ids[1]), 2);
}

TEST_F(ChunkCacheTest, AReaderKeepsAnEvictedChunkAlive) {
  ChunkCache cache({.capacity_bytes = kLen});
  crypto::Digest a = AddChunk(1), b = AddChunk(2);
  auto held = cache.Get(a, LoaderFor(a));
  CAIRN_ASSERT_OK(held);
  CAIRN_ASSERT_OK(cache.Get(b, LoaderFor(b)));
  EXPECT_FALSE(cache.Contains(a));
  EXPECT_TRUE(std::equal((*held)->data.begin(), (*held)->data.end(), plains_[1].begin()));
}

TEST_F(ChunkCacheTest, ConcurrentGetsOfOneChunkLoadItOnce) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  crypto::Digest id = AddChunk(3);
  source_.Hold();  // the first load waits until every reader has asked
  constexpr int kReaders = 8;
  std::atomic<int> ok{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&] {
      auto c = cache.Get(id, LoaderFor(id));
      if (c.ok() && std::equal((*c)->data.begin(), (*c)->data.end(), plains_[3].begin())) ++ok;
    });
  }
  // Wait on the condition: one read in flight and the other readers joined.
  while (cache.stats().joins < kReaders - 1) std::this_thread::yield();
  EXPECT_EQ(source_.InFlight(), 1);
  source_.Release();
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), kReaders);
  EXPECT_EQ(source_.ReadsOf(id), 1);
  auto s = cache.stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.joins, static_cast<uint64_t>(kReaders - 1));
}

TEST_F(ChunkCacheTest, ManyThreadsOverFewChunksFetchEachOnceWhileTheyFit) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  std::vector<crypto::Digest> ids;
  for (uint64_t seed = 1; seed <= 6; ++seed) ids.push_back(AddChunk(seed));
  source_.SetDelay(std::chrono::microseconds(500));
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round) {
        size_t k = static_cast<size_t>((t + round) % 6);
        auto c = cache.Get(ids[k], LoaderFor(ids[k]));
        if (!c.ok() || (*c)->data.size() != kLen || (*c)->data[7] != plains_[k + 1][7]) ++bad;
      }
    });
  }
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  for (const auto& id : ids) EXPECT_EQ(source_.ReadsOf(id), 1);
}

TEST_F(ChunkCacheTest, ABadChunkIsReportedOnceAndRefusedWithoutAnotherRead) {
  RecordingLogger log;
  ChunkCache cache({.capacity_bytes = 16 * kLen, .logger = &log});
  crypto::Digest bad = AddChunk(4), good = AddChunk(5);
  source_.Corrupt(bad);
  for (int i = 0; i < 3; ++i) {
    auto c = cache.Get(bad, LoaderFor(bad));
    EXPECT_EQ(CodeOf(c), StatusCode::kDataLoss);
    EXPECT_NE(std::string(c.status().message()).find(crypto::DigestHex(bad)), std::string::npos)
        << c.status().ToString();
  }
  EXPECT_EQ(source_.ReadsOf(bad), 1);
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_NE(log.lines()[0].find("CRC"), std::string::npos) << log.lines()[0];
  CAIRN_EXPECT_OK(cache.Get(good, LoaderFor(good)));
  EXPECT_FALSE(cache.TryClaim(bad).has_value());
  EXPECT_EQ(cache.stats().known_bad_hits, 2u);
}

TEST_F(ChunkCacheTest, AFailedReadIsNotRememberedAndTheNextGetTriesAgain) {
  RecordingLogger log;
  ChunkCache cache({.capacity_bytes = 16 * kLen, .logger = &log});
  crypto::Digest id = AddChunk(6);
  source_.Fail(id);
  EXPECT_EQ(CodeOf(cache.Get(id, LoaderFor(id))), StatusCode::kUnavailable);
  source_.Heal(id);
  CAIRN_EXPECT_OK(cache.Get(id, LoaderFor(id)));
  EXPECT_EQ(source_.ReadsOf(id), 2);
  EXPECT_TRUE(log.lines().empty());
}

TEST_F(ChunkCacheTest, AMissingChunkIsDamage) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  crypto::Digest id = crypto::Sha256(RandomBytes(10, 1));
  EXPECT_EQ(CodeOf(cache.Get(id, LoaderFor(id))), StatusCode::kDataLoss);
}

TEST_F(ChunkCacheTest, AClaimedChunkIsJoinedByGets) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  crypto::Digest id = AddChunk(7);
  auto claim = cache.TryClaim(id);
  ASSERT_TRUE(claim.has_value());
  EXPECT_FALSE(cache.TryClaim(id).has_value());  // one claim at a time
  std::atomic<bool> got{false};
  std::thread reader([&] {
    auto c = cache.Get(id, [] () -> Result<DecodedChunk> { return InternalError("must join"); });
    got = c.ok();
  });
  while (cache.stats().joins < 1) std::this_thread::yield();
  claim->Fulfil(LoadChunk(source_, id, kLen, nullptr));
  reader.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(source_.ReadsOf(id), 1);
}

TEST_F(ChunkCacheTest, AnAbandonedClaimLetsWaitersLoadThemselves) {
  ChunkCache cache({.capacity_bytes = 16 * kLen});
  crypto::Digest id = AddChunk(8);
  std::optional<ChunkCache::Claim> claim = cache.TryClaim(id);
  ASSERT_TRUE(claim.has_value());
  std::atomic<bool> got{false};
  std::thread reader([&] { got = cache.Get(id, LoaderFor(id)).ok(); });
  while (cache.stats().joins < 1) std::this_thread::yield();
  claim.reset();  // abandoned
  reader.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(source_.ReadsOf(id), 1);  // by the reader
  EXPECT_EQ(cache.stats().failures, 0u);
}

}  // namespace
}  // namespace cairn::access
