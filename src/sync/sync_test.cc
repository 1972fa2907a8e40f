// RunSync in process, between two local datastores, with many reads in
// flight (a latency-injecting source: the pipeline's I/O and CPU stages on
// several threads, for TSan): each distinct chunk read once, the bytes
// stored as they were, a second run reading nothing, and a chunk damaged
// on the way refused with nothing appearing on DST.
#include "sync/sync.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "blob/blob.h"
#include "pipeline/progress.h"
#include "datastore/snapshot_writer.h"
#include "store/injecting_source.h"
#include "tests/unit_test_util.h"

namespace cairn::sync {
namespace {

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

class RunSyncTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"src", "dst"}) {
      CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.Join(name)));
    }
    auto src = datastore::Datastore::Open(*env_, dir_.Join("src"));
    auto dst = datastore::Datastore::Open(*env_, dir_.Join("dst"));
    CAIRN_ASSERT_OK(src);
    CAIRN_ASSERT_OK(dst);
    src_ = std::move(*src);
    dst_ = std::move(*dst);
    // Two snapshots of 12 chunks sharing 8: 16 distinct chunks.
    Commit(kT0, 0);
    Commit(kT0 + 60, 4);
  }

  void Commit(int64_t time, uint64_t first_seed) { Commit(group_, time, first_seed); }
  void Commit(const datastore::GroupRef& group, int64_t time, uint64_t first_seed) {
    std::vector<crypto::Digest> ids;
    for (uint64_t i = 0; i < 12; ++i) {
      Bytes plain = test_util::RandomBytes(kChunk, first_seed + i);
      ids.push_back(crypto::Sha256(plain));
      auto stored = blob::Encode(plain);
      ASSERT_TRUE(stored.ok());
      CAIRN_ASSERT_OK(src_->chunks().Insert(ids.back(), *stored));
    }
    auto w = datastore::SnapshotWriter::Begin(*src_, {group, time});
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddImage("disk0.img", index::FixedIndex(12 * kChunk, kChunk, ids)));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }

  // Every chunk of `snap`'s image on DST is stored as on SRC, byte for byte.
  void ExpectSameStoredChunks(const datastore::SnapshotRef& snap) {
    auto manifest = dst_->ReadManifest(snap);
    CAIRN_ASSERT_OK(manifest);
    auto idx = dst_->ReadImageIndex(snap, manifest->archives[0]);
    CAIRN_ASSERT_OK(idx);
    for (const auto& id : idx->digests()) {
      auto a = src_->chunks().Read(id);
      auto b = dst_->chunks().Read(id);
      CAIRN_ASSERT_OK(a);
      CAIRN_ASSERT_OK(b);
      EXPECT_EQ(*a, *b);
    }
  }

  SyncOptions Options(store::ChunkSource* source) {
    SyncOptions o;
    o.logger = logger_.get();
    o.jobs = 8;
    o.cpu_workers = 3;
    o.source = source;
    o.source_name = "src";
    return o;
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::unique_ptr<datastore::Datastore> src_;
  std::unique_ptr<datastore::Datastore> dst_;
  datastore::GroupRef group_{"", "vm", "100"};
};

TEST_F(RunSyncTest, EachChunkReadOnceStoredAsIsAndNothingTheSecondTime) {
  store::InjectingSource source(src_->source(), {.latency_us = 2000});
  auto report = RunSync(*src_, *dst_, Options(&source));
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->copied, 2u);
  EXPECT_EQ(report->chunks_copied, 16u);
  EXPECT_EQ(source.reads(), 16u);  // the shared chunks were read once
  EXPECT_GT(report->peak_reads_in_flight, 1);
  auto snaps = dst_->ListAllSnapshots();
  CAIRN_ASSERT_OK(snaps);
  ASSERT_EQ(snaps->size(), 2u);
  ExpectSameStoredChunks((*snaps)[1]);

  auto again = RunSync(*src_, *dst_, Options(&source));
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->copied, 0u);
  EXPECT_EQ(again->present, 2u);
  EXPECT_EQ(source.reads(), 16u);
}

// Counts the reads in flight through it, and the most at once.
class CountingSource : public store::ChunkSource {
 public:
  explicit CountingSource(store::ChunkSource& base) : base_(base) {}
  Result<Bytes> Read(const store::ChunkId& id) override {
    Enter();
    auto r = base_.Read(id);
    --now_;
    return r;
  }
  Status ReadInto(const store::ChunkId& id, ReadBuffer* out) override {
    Enter();
    Status s = base_.ReadInto(id, out);
    --now_;
    return s;
  }
  store::SourceTraits Traits() const override { return base_.Traits(); }
  int most() const { return most_.load(); }

 private:
  void Enter() {
    int n = ++now_;
    int m = most_.load();
    while (n > m && !most_.compare_exchange_weak(m, n)) {
    }
  }
  store::ChunkSource& base_;
  std::atomic<int> now_{0}, most_{0};
};

TEST_F(RunSyncTest, GroupsRunSideBySideWithinOneReadBudget) {
  // Three more groups: four in all, copied by parallel group runs whose
  // reads together stay within the one controller's pinned limit.
  for (int g = 1; g <= 3; ++g) {
    Commit({"", "vm", std::to_string(100 + g)}, kT0, 100 * static_cast<uint64_t>(g));
  }
  store::InjectingSource slow(src_->source(), {.latency_us = 3000});
  CountingSource source(slow);
  SyncOptions options = Options(&source);
  options.jobs = 3;
  pipeline::Progress progress;
  options.progress = &progress;
  auto report = RunSync(*src_, *dst_, options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->copied, 5u);
  EXPECT_EQ(report->chunks_copied, 16u + 3 * 12u);
  EXPECT_LE(source.most(), 3);
  EXPECT_EQ(progress.done_bytes.load(), progress.total_bytes.load());
  // Listed in the selection's order, each group's snapshots oldest first.
  ASSERT_EQ(report->snapshots.size(), 5u);
  EXPECT_EQ(report->snapshots[0].name, "vm/100/2026-11-30T05:00:00Z");
  EXPECT_EQ(report->snapshots[1].name, "vm/100/2026-11-30T05:01:00Z");
  EXPECT_EQ(report->snapshots[4].name, "vm/103/2026-11-30T05:00:00Z");
  auto snaps = dst_->ListAllSnapshots();
  CAIRN_ASSERT_OK(snaps);
  EXPECT_EQ(snaps->size(), 5u);
  auto again = RunSync(*src_, *dst_, Options(&source));
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->present, 5u);
  EXPECT_EQ(again->chunks_copied, 0u);
}

// A source whose reads do not block (as an object store's or a server's):
// each ReadIntoAsync completes on a thread of its own after `latency`;
// counts those, the blocking reads, and the most asynchronous reads at once.
class AsyncSource : public store::ChunkSource {
 public:
  AsyncSource(store::ChunkSource& base, std::chrono::microseconds latency)
      : base_(base), latency_(latency) {}
  Result<Bytes> Read(const store::ChunkId& id) override {
    ++blocking_;
    return base_.Read(id);
  }
  Status ReadInto(const store::ChunkId& id, ReadBuffer* out) override {
    ++blocking_;
    return base_.ReadInto(id, out);
  }
  bool ReadsAsync() const override { return true; }
  void ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                     std::function<void(Status)> done) override {
    int n = ++now_;
    int m = most_.load();
    while (n > m && !most_.compare_exchange_weak(m, n)) {
    }
    ++async_;
    threads_.Run([this, id, out, done = std::move(done)] {
      std::this_thread::sleep_for(latency_);
      Status s = base_.ReadInto(id, out);
      --now_;
      done(std::move(s));
    });
  }
  store::SourceTraits Traits() const override { return base_.Traits(); }
  int blocking() const { return blocking_.load(); }
  int async() const { return async_.load(); }
  int most() const { return most_.load(); }

 private:
  store::ChunkSource& base_;
  const std::chrono::microseconds latency_;
  std::atomic<int> blocking_{0}, async_{0}, now_{0}, most_{0};
  test_util::ThreadPerRead threads_;  // last: joined before the rest goes
};

// An asynchronous source is read through the pipeline's one issuing thread
// (no thread parked per read), within the one read budget of groups synced
// side by side, each distinct chunk once, and nothing the second time.
TEST_F(RunSyncTest, AnAsynchronousSourceIsReadWithoutAThreadPerRead) {
  for (int g = 1; g <= 3; ++g) {
    Commit({"", "vm", std::to_string(100 + g)}, kT0, 100 * static_cast<uint64_t>(g));
  }
  AsyncSource source(src_->source(), std::chrono::microseconds(3000));
  SyncOptions options = Options(&source);
  options.jobs = 3;
  auto report = RunSync(*src_, *dst_, options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->copied, 5u);
  EXPECT_EQ(report->chunks_copied, 16u + 3 * 12u);
  EXPECT_EQ(source.async(), 16 + 3 * 12);
  EXPECT_EQ(source.blocking(), 0);
  EXPECT_GT(source.most(), 1);
  EXPECT_LE(source.most(), 3);
  auto snaps = dst_->ListAllSnapshots();
  CAIRN_ASSERT_OK(snaps);
  EXPECT_EQ(snaps->size(), 5u);
  for (const auto& snap : *snaps) ExpectSameStoredChunks(snap);
  auto again = RunSync(*src_, *dst_, Options(&source));
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->present, 5u);
  EXPECT_EQ(source.async(), 16 + 3 * 12);
}

TEST_F(RunSyncTest, ChunkDamagedOnTheWayIsRefusedAndNothingAppears) {
  store::InjectingSource source(src_->source(), {.latency_us = 500, .corrupt_rate = 1.0});
  auto report = RunSync(*src_, *dst_, Options(&source));
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kDataLoss) << report.status().ToString();
  EXPECT_NE(report.status().message().find("refused on arrival"), std::string::npos);
  auto snaps = dst_->ListAllSnapshots();
  CAIRN_ASSERT_OK(snaps);
  EXPECT_TRUE(snaps->empty());
}

}  // namespace
}  // namespace cairn::sync
