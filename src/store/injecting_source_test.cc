#include "store/injecting_source.h"

#include <chrono>
#include <map>

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::store {
namespace {

// Chunks in memory, with the traits of a local flash store.
class MemorySource final : public ChunkSource {
 public:
  void Put(const ChunkId& id, Bytes data) { chunks_[id] = std::move(data); }
  Result<Bytes> Read(const ChunkId& id) override {
    auto it = chunks_.find(id);
    if (it == chunks_.end()) return NotFoundError("no such chunk");
    return it->second;
  }
  SourceTraits Traits() const override { return SourceTraits{MediumKind::kFlash, 2, "memory"}; }

 private:
  std::map<ChunkId, Bytes> chunks_;
};

ChunkId IdOf(uint8_t b) {
  ChunkId id{};
  id[0] = b;
  return id;
}

TEST(InjectingSourceTest, ParsesLatencyAndJitter) {
  auto o = ParseLatencySpec("20");
  CAIRN_ASSERT_OK(o);
  EXPECT_EQ(o->latency_us, 20000);
  EXPECT_EQ(o->jitter_us, 0);
  o = ParseLatencySpec("0.5:0.25");
  CAIRN_ASSERT_OK(o);
  EXPECT_EQ(o->latency_us, 500);
  EXPECT_EQ(o->jitter_us, 250);
  for (const char* bad : {"", "x", "-1", "60001", "5:", ":5", "5:x", "1e9", "5 "}) {
    auto r = ParseLatencySpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("MS:JITTER_MS"), std::string::npos) << bad;
  }
}

TEST(InjectingSourceTest, ReadsWaitAndReturnTheBaseBytes) {
  MemorySource base;
  base.Put(IdOf(1), Bytes(100, 7));
  InjectionOptions o;
  o.latency_us = 20000;
  InjectingSource source(base, o);
  const auto start = std::chrono::steady_clock::now();
  auto got = source.Read(IdOf(1));
  CAIRN_ASSERT_OK(got);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(20));
  EXPECT_EQ(*got, Bytes(100, 7));
  EXPECT_EQ(source.Read(IdOf(2)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(source.reads(), 2u);
}

TEST(InjectingSourceTest, InjectsErrorsAndFlippedBits) {
  MemorySource base;
  base.Put(IdOf(1), Bytes(64, 0));
  InjectionOptions o;
  o.error_rate = 1;
  InjectingSource failing(base, o);
  auto r = failing.Read(IdOf(1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("injected"), std::string::npos);

  o.error_rate = 0;
  o.corrupt_rate = 1;
  InjectingSource corrupting(base, o);
  auto got = corrupting.Read(IdOf(1));
  CAIRN_ASSERT_OK(got);
  int bits = 0;
  for (uint8_t b : *got) bits += __builtin_popcount(b);
  EXPECT_EQ(bits, 1);
}

TEST(InjectingSourceTest, LatencyMakesItANetworkSourceWithItsStartingPoint) {
  MemorySource base;
  InjectingSource plain(base, InjectionOptions{});
  EXPECT_EQ(plain.Traits().medium, MediumKind::kFlash);
  EXPECT_EQ(plain.Traits().initial_reads_in_flight, 2);

  InjectionOptions o;
  o.latency_us = 20000;
  InjectingSource slow(base, o);
  const SourceTraits t = slow.Traits();
  EXPECT_EQ(t.medium, MediumKind::kNetwork);
  // As a cairn server's source starts: slow start from a local store's 2
  // spent the first few hundred ms of a 20 ms sweep point finding more.
  EXPECT_EQ(t.initial_reads_in_flight, kNetworkInitialReads);
  EXPECT_NE(t.description.find("20000 us latency"), std::string::npos) << t.description;
}

}  // namespace
}  // namespace cairn::store
