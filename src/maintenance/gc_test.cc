#include "maintenance/gc.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "blob/blob.h"
#include "crypto/sha256.h"
#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"

namespace cairn::maintenance {
namespace {

using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr int64_t kSecond = 1000000000;

TEST(PrefixSetTest, HoldsWhatWasInsertedAndLittleElse) {
  PrefixSet set;
  std::mt19937_64 rng(7);
  std::vector<uint64_t> in;
  for (int i = 0; i < 200000; ++i) in.push_back(rng());
  for (uint64_t k : in) set.Insert(k);
  for (uint64_t k : in) set.Insert(k);  // twice: counted once
  EXPECT_EQ(set.size(), in.size());
  for (uint64_t k : in) ASSERT_TRUE(set.Contains(k));
  int false_hits = 0;
  for (int i = 0; i < 200000; ++i) false_hits += set.Contains(rng());
  EXPECT_EQ(false_hits, 0);
  // Compact: well under 32 bytes per key (no pointers, no full digests).
  EXPECT_LT(set.memory_bytes(), in.size() * 32);
  set.Insert(0);
  EXPECT_TRUE(set.Contains(0));
}

TEST(PrefixSetTest, ConcurrentInserts) {
  PrefixSet set;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&set, t] {
      for (uint64_t i = 0; i < 50000; ++i) set.Insert((i * 4 + t) * 0x9E3779B97F4A7C15ull);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(set.size(), 200000u);
}

TEST(IdPrefixTest, DigestAndHexAgree) {
  crypto::Digest d = crypto::Sha256(AsBytes("x"));
  std::string hex = crypto::DigestHex(d);
  EXPECT_EQ(HexIdPrefix(hex), IdPrefix(d.data()));
  EXPECT_EQ(HexIdPrefix("0123"), std::nullopt);
  EXPECT_EQ(HexIdPrefix("zz23456789abcdef00"), std::nullopt);
}

class GcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.path()));
    auto store = datastore::Datastore::Open(*env_, dir_.path());
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  // Stores `n` new distinct chunks; returns their ids.
  std::vector<crypto::Digest> Chunks(int n) {
    std::vector<crypto::Digest> ids;
    for (int i = 0; i < n; ++i) {
      Bytes data = test_util::RandomBytes(4096, ++seed_);
      crypto::Digest id = crypto::Sha256(data);
      auto stored = blob::Encode(data);
      EXPECT_TRUE(stored.ok());
      EXPECT_TRUE(store_->chunks().Insert(id, *stored).ok());
      ids.push_back(id);
    }
    return ids;
  }

  // A snapshot of group vm/ID at kT0 + t with one image of `ids`.
  datastore::SnapshotRef Snapshot(const std::string& id, int64_t t,
                                  const std::vector<crypto::Digest>& ids) {
    datastore::SnapshotRef snap{datastore::GroupRef{"", "vm", id}, kT0 + t};
    index::FixedIndex idx(uint64_t{index::kMinChunkSize} * ids.size(), index::kMinChunkSize, ids);
    auto w = datastore::SnapshotWriter::Begin(*store_, snap);
    EXPECT_TRUE(w.ok());
    EXPECT_TRUE((*w)->AddImage("disk0.img", idx).ok());
    EXPECT_TRUE((*w)->Commit("test").ok());
    return snap;
  }

  void Forget(const datastore::SnapshotRef& snap) {
    std::string dir = store_->SnapshotDir(snap);
    CAIRN_ASSERT_OK(env_->RemoveFile(JoinPath(dir, index::kManifestFileName)));
    CAIRN_ASSERT_OK(datastore::RemoveSnapshotDir(*env_, dir));
  }

  // Makes every chunk file look last used an hour ago.
  void AgeChunks() {
    int64_t old = env_->NowUnixNanos() - 3600 * kSecond;
    for (unsigned p = 0; p < store::kChunkPrefixDirs; ++p) {
      std::string dir = store_->chunks().PrefixDirPath(p);
      auto names = env_->ListDir(dir);
      ASSERT_TRUE(names.ok());
      for (const auto& n : *names) {
        std::string path = JoinPath(dir, n);
        struct timespec times[2] = {{old / kSecond, 0}, {old / kSecond, 0}};
        ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
      }
    }
  }

  std::set<std::string> Files() {
    std::set<std::string> out;
    for (unsigned p = 0; p < store::kChunkPrefixDirs; ++p) {
      auto names = env_->ListDir(store_->chunks().PrefixDirPath(p));
      if (names.ok()) out.insert(names->begin(), names->end());
    }
    return out;
  }

  bool Present(const crypto::Digest& id) { return Files().count(crypto::DigestHex(id)) == 1; }

  Result<GcReport> Gc(int64_t grace = 0, bool dry_run = false) {
    GcOptions o;
    o.grace_seconds = grace;
    o.dry_run = dry_run;
    o.threads = 3;
    return RunGc(*store_, o);
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::unique_ptr<datastore::Datastore> store_;
  uint64_t seed_ = 0;
};

TEST_F(GcTest, RemovesExactlyTheUnreferencedChunks) {
  auto shared = Chunks(3);
  auto a_only = Chunks(4);
  auto b_only = Chunks(5);
  std::vector<crypto::Digest> a = shared, b = shared;
  a.insert(a.end(), a_only.begin(), a_only.end());
  b.insert(b.end(), b_only.begin(), b_only.end());
  Snapshot("a", 0, a);
  auto sb = Snapshot("b", 0, b);
  Forget(sb);
  AgeChunks();

  auto dry = Gc(0, /*dry_run=*/true);
  CAIRN_ASSERT_OK(dry);
  EXPECT_EQ(dry->removed_chunks, 5u);
  EXPECT_EQ(Files().size(), 12u);  // a dry run removes nothing

  auto r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->snapshots, 1u);
  EXPECT_EQ(r->referenced_chunks, 7u);
  EXPECT_EQ(r->in_use_chunks, 7u);
  EXPECT_EQ(r->removed_chunks, 5u);
  EXPECT_GT(r->removed_bytes, 5u * 4096 / 2);
  EXPECT_EQ(r->pending_chunks, 0u);
  EXPECT_FALSE(r->deferred);
  for (const auto& id : a) EXPECT_TRUE(Present(id));
  for (const auto& id : b_only) EXPECT_FALSE(Present(id));
  EXPECT_EQ(Files().size(), 7u);  // no trash left behind

  auto again = Gc();
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->removed_chunks, 0u);
  auto last = ReadLastGc(*store_);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->removed_chunks, 0u);
  EXPECT_GT(last->end_unix_ns, 0);
}

TEST_F(GcTest, GraceKeepsRecentlyUsedChunks) {
  auto ids = Chunks(4);
  auto s = Snapshot("a", 0, ids);
  Forget(s);
  auto r = Gc(/*grace=*/600);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 0u);
  EXPECT_EQ(r->pending_chunks, 4u);
  AgeChunks();
  r = Gc(600);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 4u);
}

TEST_F(GcTest, ContainsMarksAChunkAsUsed) {
  auto ids = Chunks(2);
  AgeChunks();  // unreferenced and old: garbage...
  // ...but a backup finds one and is about to reference it.
  auto found = store_->chunks().Contains(ids[0]);
  CAIRN_ASSERT_OK(found);
  EXPECT_TRUE(*found);
  auto r = Gc(/*grace=*/60);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 1u);
  EXPECT_TRUE(Present(ids[0]));
  EXPECT_FALSE(Present(ids[1]));
}

TEST_F(GcTest, RunningBackupHoldsTheCutoffBackAndDefersRemoval) {
  auto old_ids = Chunks(3);
  AgeChunks();
  // A backup registered before these chunks were last used...
  auto registration = store_->RegisterWriter();
  CAIRN_ASSERT_OK(registration);
  auto newer = Chunks(2);  // ...and chunks it inserted since: unreferenced yet
  auto r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_FALSE(r->held_back_by.empty());
  // The old ones are set aside, not deleted, while the backup runs.
  EXPECT_TRUE(r->deferred);
  EXPECT_EQ(r->removed_chunks, 0u);
  EXPECT_EQ(r->pending_chunks, 5u);
  for (const auto& id : newer) EXPECT_TRUE(Present(id));
  for (const auto& id : old_ids) {
    EXPECT_FALSE(Present(id));
    EXPECT_EQ(Files().count(crypto::DigestHex(id) + store::kTrashSuffix), 1u);
    // Still readable: a backup might have referenced it in the race.
    CAIRN_EXPECT_OK(store_->chunks().Read(id));
  }
  // While the backup runs, a later gc still may not delete the set-aside ones.
  r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 0u);
  registration->reset();  // the backup ends (its file stays, unlocked)
  AgeChunks();
  r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 5u);
  EXPECT_TRUE(Files().empty());
  auto writers = env_->ListDir(JoinPath(store_->path(), datastore::kWritersDirName));
  CAIRN_ASSERT_OK(writers);
  EXPECT_TRUE(writers->empty());  // dead registrations cleaned up
}

TEST_F(GcTest, PutsBackASetAsideChunkThatIsReferenced) {
  auto ids = Chunks(2);
  Snapshot("a", 0, ids);
  std::string path = store_->chunks().ChunkPath(ids[0]);
  CAIRN_ASSERT_OK(env_->Rename(path, path + store::kTrashSuffix));
  CAIRN_EXPECT_OK(store_->chunks().Read(ids[0]));
  auto r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->restored_chunks, 1u);
  EXPECT_EQ(r->removed_chunks, 0u);
  EXPECT_TRUE(Present(ids[0]));
}

TEST_F(GcTest, KilledRunIsFinishedSafelyByTheNext) {
  auto ids = Chunks(3);
  AgeChunks();
  // A run that set chunks aside and died: "running" left behind.
  for (const auto& id : ids) {
    std::string path = store_->chunks().ChunkPath(id);
    CAIRN_ASSERT_OK(env_->Rename(path, path + store::kTrashSuffix));
  }
  std::string gc_dir = JoinPath(store_->path(), datastore::kGcDirName);
  CAIRN_ASSERT_OK(CreateDirs(*env_, gc_dir));
  CAIRN_ASSERT_OK(WriteFileAtomic(*env_, JoinPath(gc_dir, "running"), AsBytes("1")));
  auto r = Gc();
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_chunks, 3u);  // no backup ran: safe now
  EXPECT_TRUE(Files().empty());
  EXPECT_FALSE(env_->Stat(JoinPath(gc_dir, "running")).ok());
}

TEST_F(GcTest, RefusesToRunTwiceAtOnce) {
  std::string gc_dir = JoinPath(store_->path(), datastore::kGcDirName);
  CAIRN_ASSERT_OK(CreateDirs(*env_, gc_dir));
  auto held = env_->TryLock(JoinPath(gc_dir, "lock"), /*exclusive=*/true);
  CAIRN_ASSERT_OK(held);
  // flock locks of one process conflict across descriptors, as between processes.
  auto r = Gc();
  EXPECT_EQ(CodeOf(r), StatusCode::kAborted);
}

TEST_F(GcTest, UnreadableIndexStopsBeforeRemovingAnything) {
  auto ids = Chunks(2);
  auto s = Snapshot("a", 0, ids);
  auto garbage = Chunks(2);
  AgeChunks();
  test_util::WriteFileOrFail(JoinPath(store_->SnapshotDir(s), "disk0.img.fidx"),
                             AsBytes("not an index"));
  auto r = Gc();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("disk0.img"), std::string_view::npos);
  EXPECT_NE(r.status().message().find("before removing anything"), std::string_view::npos);
  EXPECT_EQ(Files().size(), 4u);
}

TEST_F(GcTest, RemovesOldTemporaryFilesOnly) {
  auto ids = Chunks(1);
  Snapshot("a", 0, ids);
  std::string tmp = store_->chunks().ChunkPath(crypto::Sha256(AsBytes("t"))) + ".tmp-1-1";
  test_util::WriteFileOrFail(tmp, AsBytes("partial"));
  auto r = Gc(/*grace=*/60);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_temp_files, 0u);  // may be an insert in progress
  AgeChunks();
  r = Gc(60);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed_temp_files, 1u);
  EXPECT_FALSE(env_->Stat(tmp).ok());
}

}  // namespace
}  // namespace cairn::maintenance
