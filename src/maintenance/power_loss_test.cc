// Power-loss test of the local datastore: a scripted run (backup of an
// image and a tree, verify with the ledger, a second backup, prune, gc,
// verify) through PowerLossEnv, cut at every sync point in both metadata
// modes and at a seeded sample of all operations; after each cut the tree a
// remount shows must satisfy:
//   - every listed snapshot is one the run committed, restores byte for byte
//     and verifies (so none references a missing or torn chunk);
//   - the verify ledger opens without damage and the locks are free;
//   - the next backup, prune, gc and verify succeed, and that backup restores.
//
// CAIRN_POWERLOSS_POINTS=N samples N operations (default: a short form for
// CI); CAIRN_POWERLOSS_SEED=S changes the sample. Every cut is printed on
// failure as "sync|op N, mode" so it can be replayed alone.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "backup/backup.h"
#include "base/power_loss_env.h"
#include "datastore/datastore.h"
#include "maintenance/gc.h"
#include "maintenance/prune.h"
#include "restore/restore.h"
#include "tests/unit_test_util.h"
#include "verify/ledger.h"
#include "verify/verify.h"

namespace cairn::maintenance {
namespace {

namespace fs = std::filesystem;
using Metadata = PowerLossEnv::Metadata;
using Data = PowerLossEnv::Data;

// How the disk looks after a cut: namespace changes kept or not, unsynced
// contents dropped or torn.
struct Crash {
  Metadata metadata;
  Data data;
  uint64_t seed = 0;
  std::string ToString() const {
    return fmt::format("{}, {}", metadata == Metadata::kSyncedOnly ? "synced only" : "all metadata",
                       data == Data::kSyncedOnly ? "synced data"
                                                 : fmt::format("torn tails (seed {})", seed));
  }
};
constexpr Crash kCrashes[] = {{Metadata::kSyncedOnly, Data::kSyncedOnly},
                              {Metadata::kAllMetadata, Data::kSyncedOnly},
                              {Metadata::kAllMetadata, Data::kTornTail, 1}};

constexpr int64_t kT1 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr int64_t kT2 = kT1 + 3600;
constexpr int64_t kT3 = kT1 + 7200;
constexpr uint32_t kChunk = index::kMinChunkSize;

uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

// Reads a tree into path -> contents (directories as "<dir>").
std::map<std::string, std::string> TreeContents(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    std::string rel = fs::relative(e.path(), root).string();
    if (e.is_directory()) {
      out[rel] = "<dir>";
    } else {
      Bytes data = test_util::ReadFileOrFail(e.path().string());
      out[rel] = std::string(AsStringView(data));
    }
  }
  return out;
}

struct Source {
  std::string image;  // path of the image file
  std::string tree;   // path of the tree
};

class PowerLossTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_path_ = dir_.Join("store");
    // Two versions of an image (6 chunks of which 2 change, one zero) and
    // of a tree (one file changed, one added, one removed).
    for (int v = 1; v <= 2; ++v) {
      Bytes image = test_util::RandomBytes(6 * kChunk + 300, 10);
      std::fill(image.begin() + 3 * kChunk, image.begin() + 4 * kChunk, 0);
      if (v == 2) {
        Bytes fresh = test_util::RandomBytes(2 * kChunk, 20);
        std::copy(fresh.begin(), fresh.end(), image.begin() + kChunk);
      }
      sources_[v].image = dir_.Join(fmt::format("image{}", v));
      test_util::WriteFileOrFail(sources_[v].image, image);
      std::string tree = dir_.Join(fmt::format("tree{}", v));
      fs::create_directories(tree + "/etc");
      fs::create_directories(tree + "/var/lib");
      test_util::WriteFileOrFail(tree + "/etc/hosts", AsBytes("127.0.0.1 localhost\n"));
      test_util::WriteFileOrFail(tree + "/var/lib/big",
                                 test_util::RandomBytes(3 * kChunk + 77, 30 + v));
      if (v == 1) test_util::WriteFileOrFail(tree + "/old", AsBytes("only in v1"));
      if (v == 2) test_util::WriteFileOrFail(tree + "/etc/new", AsBytes("only in v2"));
      sources_[v].tree = tree;
    }
    expected_[kT1] = &sources_[1];
    expected_[kT2] = &sources_[2];
  }

  // A datastore as `cairn init` leaves it, modelled from here on.
  void FreshStore() {
    fs::remove_all(store_path_);
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*posix_, store_path_));
    CAIRN_ASSERT_OK(env_.Start());
  }

  Status Backup(const datastore::Datastore& store, int64_t time, const Source& src) {
    backup::BackupOptions o;
    o.group = group_;
    o.time = time;
    o.archives = {{"disk0.img", src.image}, {"root.tree", src.tree}};
    o.image.chunk_size = kChunk;
    o.image.workers = 1;
    o.image.reads = 1;
    o.tree.workers = 1;
    o.tree.readers = 1;
    o.tree.xattrs = false;
    o.logger = logger_.get();
    o.tree.logger = logger_.get();
    return backup::RunBackup(store, o).status();
  }

  Result<verify::VerifyReport> Verify(const datastore::Datastore& store) {
    verify::VerifyOptions o;
    o.jobs = 1;
    o.cpu_workers = 1;
    o.logger = logger_.get();
    return verify::RunVerify(store, o);
  }

  Status Prune(const datastore::Datastore& store) {
    PruneOptions o;
    o.keep.last = 1;
    return maintenance::Prune(store, "", group_, o).status();
  }

  Status Gc(const datastore::Datastore& store) {
    GcOptions o;
    o.grace_seconds = 0;  // so the chunks only the pruned snapshot used go now
    o.threads = 1;
    o.logger = logger_.get();
    return RunGc(store, o).status();
  }

  // The scripted run; stops at the first error (the power cut).
  Status Script() {
    CAIRN_ASSIGN_OR_RETURN(auto store, datastore::Datastore::Open(env_, store_path_));
    CAIRN_RETURN_IF_ERROR(Backup(*store, kT1, sources_[1]));
    CAIRN_RETURN_IF_ERROR(Verify(*store).status());
    CAIRN_RETURN_IF_ERROR(Backup(*store, kT2, sources_[2]));
    CAIRN_RETURN_IF_ERROR(Prune(*store));
    CAIRN_RETURN_IF_ERROR(Gc(*store));
    return Verify(*store).status();
  }

  // Restores every archive of `snap` and compares it with `src`.
  void ExpectRestores(const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                      const Source& src) {
    std::string out = dir_.Join("out");
    fs::remove_all(out);
    restore::RestoreRequest r;
    r.snapshot = {snap.group, false, snap.time};
    r.target = out;
    r.all = true;
    r.jobs = 1;
    r.cpu_workers = 1;
    CAIRN_ASSERT_OK(restore::RunRestore(store, r));
    EXPECT_EQ(test_util::ReadFileOrFail(out + "/disk0.img"), test_util::ReadFileOrFail(src.image))
        << snap.ToString();
    EXPECT_EQ(TreeContents(out + "/root"), TreeContents(src.tree)) << snap.ToString();
  }

  // The invariants, on the tree a remount shows.
  void Check() {
    auto store = datastore::Datastore::Open(env_, store_path_);
    CAIRN_ASSERT_OK(store);
    auto snaps = (*store)->ListAllSnapshots();
    CAIRN_ASSERT_OK(snaps);
    for (const auto& snap : *snaps) {
      ASSERT_TRUE(expected_.contains(snap.time)) << "unknown snapshot " << snap.ToString();
      ASSERT_NO_FATAL_FAILURE(ExpectRestores(**store, snap, *expected_[snap.time]));
    }
    {
      std::string warning;
      auto ledger = verify::Ledger::Open(env_, store_path_, &warning);
      CAIRN_ASSERT_OK(ledger);
      EXPECT_EQ(warning, "");
    }
    auto report = Verify(**store);
    CAIRN_ASSERT_OK(report);
    ASSERT_TRUE(report->ok()) << report->problems.front().what << ": "
                              << report->problems.front().error;
    EXPECT_EQ(report->ledger_warning, "");
    EXPECT_EQ(report->snapshots.size(), snaps->size());
    // The next run of everything succeeds (a free group lock, gc lock, ledger).
    CAIRN_ASSERT_OK(Backup(**store, kT3, sources_[2]));
    CAIRN_ASSERT_OK(Prune(**store));
    CAIRN_ASSERT_OK(Gc(**store));
    auto again = Verify(**store);
    CAIRN_ASSERT_OK(again);
    ASSERT_TRUE(again->ok()) << again->problems.front().what << ": "
                             << again->problems.front().error;
    ASSERT_NO_FATAL_FAILURE(ExpectRestores(**store, {group_, kT3}, sources_[2]));
  }

  // One cut: a fresh store, the script up to the cut, the remount, the checks.
  void CutAndCheck(bool by_sync, uint64_t n, const Crash& crash) {
    SCOPED_TRACE(fmt::format("cut before {} {}, {}", by_sync ? "sync" : "op", n, crash.ToString()));
    ASSERT_NO_FATAL_FAILURE(FreshStore());
    if (by_sync) {
      env_.CutBeforeSync(n);
    } else {
      env_.CutBeforeOp(n);
    }
    // After the cut every call fails; the run may still end "OK" where it
    // ignores a failed cleanup, as a process would never get to.
    Status s = Script();
    ASSERT_TRUE(env_.is_cut()) << "the run ended before the cut: " << s.ToString();
    CAIRN_ASSERT_OK(env_.Remount(crash.metadata, crash.data, crash.seed));
    ASSERT_NO_FATAL_FAILURE(Check());
    ++cuts_;
  }

  std::unique_ptr<Env> posix_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::string store_path_;
  PowerLossEnv env_{posix_.get(), dir_.Join("store")};
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  datastore::GroupRef group_{"", "vm", "100"};
  Source sources_[3];
  std::map<int64_t, const Source*> expected_;
  uint64_t cuts_ = 0;
};

TEST_F(PowerLossTest, UncutRunPassesTheChecks) {
  ASSERT_NO_FATAL_FAILURE(FreshStore());
  CAIRN_ASSERT_OK(Script());
  EXPECT_GT(env_.sync_ops(), 10u);
  CAIRN_ASSERT_OK(env_.Remount(Metadata::kSyncedOnly));  // power cut after the run
  ASSERT_NO_FATAL_FAILURE(Check());
}

TEST_F(PowerLossTest, EverySyncPointAndASampleOfOperations) {
  // CAIRN_POWERLOSS_REPLAY="op|sync N CRASH [SEED]" runs that one cut alone
  // (CRASH: 0 synced only, 1 all metadata, 2 all metadata with torn tails).
  if (const char* replay = std::getenv("CAIRN_POWERLOSS_REPLAY"); replay != nullptr) {
    char kind[8] = {};
    unsigned long long n = 0, seed = 1;
    int crash = 0;
    ASSERT_GE(std::sscanf(replay, "%7s %llu %d %llu", kind, &n, &crash, &seed), 3) << replay;
    Crash c = kCrashes[crash];
    c.seed = seed;
    ASSERT_NO_FATAL_FAILURE(CutAndCheck(std::string_view(kind) == "sync", n, c));
    return;
  }
  ASSERT_NO_FATAL_FAILURE(FreshStore());
  CAIRN_ASSERT_OK(Script());
  const uint64_t syncs = env_.sync_ops();
  const uint64_t ops = env_.ops();
  // Before each sync (and after the last): the state the strict model
  // reaches is the same anywhere between two syncs.
  for (uint64_t n = 1; n <= syncs + 1 && !HasFatalFailure(); ++n) {
    for (const Crash& crash : kCrashes) {
      if (n == syncs + 1) {
        // No cut inside the run: the power fails right after it.
        ASSERT_NO_FATAL_FAILURE(FreshStore());
        CAIRN_ASSERT_OK(Script());
        env_.CutNow();
        CAIRN_ASSERT_OK(env_.Remount(crash.metadata, crash.data, crash.seed));
        ASSERT_NO_FATAL_FAILURE(Check());
        ++cuts_;
      } else {
        ASSERT_NO_FATAL_FAILURE(CutAndCheck(/*by_sync=*/true, n, crash));
      }
    }
  }
  const uint64_t sync_cuts = cuts_;
  // Any operation, with the journal committed up to it (each prefix of the
  // namespace changes) or not.
  const uint64_t points = EnvNumber("CAIRN_POWERLOSS_POINTS", 24);
  std::mt19937_64 rng(EnvNumber("CAIRN_POWERLOSS_SEED", 29));
  for (uint64_t i = 0; i < points && !HasFatalFailure(); ++i) {
    uint64_t n = 1 + rng() % ops;
    Crash crash = kCrashes[rng() % std::size(kCrashes)];
    crash.seed = rng();
    ASSERT_NO_FATAL_FAILURE(CutAndCheck(/*by_sync=*/false, n, crash));
  }
  std::printf("power-loss cuts: %llu (%llu sync points x 3 crash states, %llu of %llu operations)\n",
              static_cast<unsigned long long>(cuts_), static_cast<unsigned long long>(syncs + 1),
              static_cast<unsigned long long>(cuts_ - sync_cuts),
              static_cast<unsigned long long>(ops));
}

}  // namespace
}  // namespace cairn::maintenance
