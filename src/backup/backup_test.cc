#include "backup/backup.h"

#include <gtest/gtest.h>

#include "base/fault_injection_env.h"
#include "blob/blob.h"
#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"
#include "verify/verify.h"

namespace cairn::backup {
namespace {

using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

class RunBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_path_ = dir_.Join("store");
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*posix_, store_path_));
    auto store = datastore::Datastore::Open(env_, store_path_);  // through the fault env
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    image_ = MakeImage(1);
    image_path_ = dir_.Join("disk0.raw");
    test_util::WriteFileOrFail(image_path_, image_);
    conf_path_ = dir_.Join("vm.conf");
    test_util::WriteFileOrFail(conf_path_, AsBytes("cores: 4\nmemory: 8192\n"));
  }

  // 12 chunks and a 500-byte tail: random, zeros and a repeat.
  static Bytes MakeImage(uint64_t seed) {
    Bytes image = test_util::RandomBytes(12 * kChunk + 500, seed);
    std::fill(image.begin() + 2 * kChunk, image.begin() + 5 * kChunk, 0);  // 3 zero chunks
    std::copy_n(image.begin(), kChunk, image.begin() + 7 * kChunk);        // chunk 7 = chunk 0
    return image;
  }

  BackupOptions Options(int64_t time, bool with_blob = true) {
    BackupOptions o;
    o.group = group_;
    o.time = time;
    o.archives.push_back(ArchiveSpec{"disk0.img", image_path_});
    if (with_blob) o.archives.push_back(ArchiveSpec{"vm.conf.blob", conf_path_});
    o.image.chunk_size = kChunk;
    o.image.workers = 2;
    o.created_by = "unit-test";
    o.logger = logger_.get();
    return o;
  }

  std::vector<datastore::SnapshotRef> Listed() {
    auto snaps = store_->ListSnapshots(group_);
    EXPECT_TRUE(snaps.ok()) << snaps.status().ToString();
    return snaps.ok() ? *snaps : std::vector<datastore::SnapshotRef>{};
  }

  std::unique_ptr<Env> posix_ = NewPosixEnv();
  FaultInjectionEnv env_{posix_.get()};
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::string store_path_;
  std::unique_ptr<datastore::Datastore> store_;
  datastore::GroupRef group_{"", "vm", "100"};
  Bytes image_;
  std::string image_path_;
  std::string conf_path_;
};

TEST_F(RunBackupTest, FirstAndIncrementalBackup) {
  std::vector<std::string> done;
  BackupOptions options = Options(kT0);
  options.on_archive_done = [&](const ArchiveReport& r) { done.push_back(r.name); };
  auto first = RunBackup(*store_, options);
  CAIRN_ASSERT_OK(first);
  EXPECT_EQ(done, (std::vector<std::string>{"disk0.img", "vm.conf.blob"}));
  EXPECT_EQ(first->snapshot, (datastore::SnapshotRef{group_, kT0}));
  ASSERT_EQ(first->archives.size(), 2u);
  const ArchiveReport& disk = first->archives[0];
  EXPECT_EQ(disk.kind, index::ArchiveKind::kImage);
  EXPECT_FALSE(disk.had_base);
  EXPECT_EQ(disk.stats.bytes, image_.size());
  EXPECT_EQ(disk.stats.chunks, 13u);
  EXPECT_EQ(disk.stats.zero_chunks, 3u);
  EXPECT_EQ(disk.stats.new_chunks, 13u - 2 - 1);  // two zero repeats, one data repeat
  EXPECT_EQ(disk.stats.reused_chunks, 3u);
  EXPECT_EQ(first->archives[1].kind, index::ArchiveKind::kBlob);
  EXPECT_EQ(first->archives[1].stats.bytes, 22u);
  EXPECT_EQ(Listed().size(), 1u);

  auto second = RunBackup(*store_, Options(kT0 + 60));
  CAIRN_ASSERT_OK(second);
  EXPECT_TRUE(second->archives[0].had_base);
  EXPECT_EQ(second->archives[0].stats.new_chunks, 0u);
  EXPECT_EQ(second->archives[0].stats.stored_bytes, 0u);
  EXPECT_EQ(second->archives[0].stats.reused_chunks, 13u);
  EXPECT_EQ(Listed().size(), 2u);

  auto m = store_->ReadManifest(second->snapshot);
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->created_by, "unit-test");
  ASSERT_NE(m->Find("disk0.img"), nullptr);
  EXPECT_EQ(m->Find("disk0.img")->size, image_.size());
  EXPECT_EQ(m->Find("disk0.img")->chunk_size, kChunk);
}

TEST_F(RunBackupTest, FailedVerifyDisqualifiesTheBase) {
  auto first = RunBackup(*store_, Options(kT0, false));
  CAIRN_ASSERT_OK(first);
  CAIRN_ASSERT_OK(store_->WriteVerifyState(
      first->snapshot, datastore::VerifyState{datastore::VerifyOutcome::kFailed, kT0, 1}));
  auto second = RunBackup(*store_, Options(kT0 + 60, false));
  CAIRN_ASSERT_OK(second);
  EXPECT_FALSE(second->archives[0].had_base);
  // Chunks still found in the store are reused, not rewritten.
  EXPECT_EQ(second->archives[0].stats.new_chunks, 0u);
}

TEST_F(RunBackupTest, FullDiskFailsWithoutDamage) {
  CAIRN_ASSERT_OK(RunBackup(*store_, Options(kT0)));

  // A different image needs new chunks; the disk fills up after two of them.
  test_util::WriteFileOrFail(image_path_, MakeImage(2));
  env_.SetWriteBudget(2 * (kChunk + 64));
  auto failed = RunBackup(*store_, Options(kT0 + 60));
  EXPECT_EQ(CodeOf(failed), StatusCode::kResourceExhausted);
  EXPECT_NE(failed.status().message().find("disk0.img"), std::string_view::npos)
      << failed.status().ToString();

  auto snaps = Listed();
  ASSERT_EQ(snaps.size(), 1u);
  EXPECT_EQ(snaps[0].time, kT0);
  EXPECT_FALSE(posix_->Stat(store_->SnapshotDir({group_, kT0 + 60})).ok());

  verify::VerifyOptions verify_options;
  verify_options.logger = logger_.get();
  auto report = verify::RunVerify(*store_, verify_options);
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  ASSERT_EQ(report->snapshots.size(), 1u);
  EXPECT_TRUE(report->snapshots[0].ok);

  // With space again, the same backup works.
  env_.SetWriteBudget(-1);
  CAIRN_ASSERT_OK(RunBackup(*store_, Options(kT0 + 60)));
  EXPECT_EQ(Listed().size(), 2u);
}

TEST_F(RunBackupTest, FullDiskWhileWritingSnapshotFiles) {
  // No chunk is new, but the index and manifest cannot be written: no snapshot.
  auto first = RunBackup(*store_, Options(kT0, false));
  CAIRN_ASSERT_OK(first);
  env_.SetWriteBudget(0);  // nothing new to store, then the index/manifest writes fail
  auto second = RunBackup(*store_, Options(kT0 + 60, false));
  EXPECT_EQ(CodeOf(second), StatusCode::kResourceExhausted);
  EXPECT_EQ(Listed().size(), 1u);
}

TEST_F(RunBackupTest, SourceErrorsNameTheArchive) {
  BackupOptions missing = Options(kT0, false);
  missing.archives[0].source = dir_.Join("no-such-image");
  auto r = RunBackup(*store_, missing);
  EXPECT_EQ(CodeOf(r), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("disk0.img"), std::string_view::npos);
  EXPECT_NE(r.status().message().find("no-such-image"), std::string_view::npos);

  BackupOptions dir_source = Options(kT0, false);
  dir_source.archives[0].source = dir_.path();
  EXPECT_EQ(CodeOf(RunBackup(*store_, dir_source)), StatusCode::kInvalidArgument);

  std::string big = dir_.Join("big.conf");
  test_util::WriteFileOrFail(big, Bytes(blob::kMaxRawSize + 1, 'x'));
  BackupOptions big_blob = Options(kT0);
  big_blob.archives[1].source = big;
  auto rb = RunBackup(*store_, big_blob);
  EXPECT_EQ(CodeOf(rb), StatusCode::kInvalidArgument);
  EXPECT_NE(rb.status().message().find(".img"), std::string_view::npos);  // the hint

  BackupOptions none = Options(kT0);
  none.archives.clear();
  EXPECT_EQ(CodeOf(RunBackup(*store_, none)), StatusCode::kInvalidArgument);

  EXPECT_TRUE(Listed().empty());  // nothing half-done is visible
  auto names = posix_->ListDir(store_->GroupDir(group_));
  CAIRN_ASSERT_OK(names);
  for (const auto& n : *names) EXPECT_EQ(n, ".lock");
}

TEST_F(RunBackupTest, ConcurrentBackupOfTheGroupIsAborted) {
  auto lock = store_->LockGroup(group_);
  CAIRN_ASSERT_OK(lock);
  auto r = RunBackup(*store_, Options(kT0));
  EXPECT_EQ(CodeOf(r), StatusCode::kAborted);
}

TEST_F(RunBackupTest, ExistingSnapshotTimeIsAlreadyExists) {
  CAIRN_ASSERT_OK(RunBackup(*store_, Options(kT0)));
  EXPECT_EQ(CodeOf(RunBackup(*store_, Options(kT0))), StatusCode::kAlreadyExists);
  EXPECT_EQ(Listed().size(), 1u);
}

TEST(ParseArchiveSpecTest, ParsesAndRejects) {
  auto spec = ParseArchiveSpec("disk0.img=/dev/vdb");
  CAIRN_ASSERT_OK(spec);
  EXPECT_EQ(spec->name, "disk0.img");
  EXPECT_EQ(spec->source, "/dev/vdb");
  auto eq_in_path = ParseArchiveSpec("vm.conf.blob=/etc/a=b.conf");
  CAIRN_ASSERT_OK(eq_in_path);
  EXPECT_EQ(eq_in_path->source, "/etc/a=b.conf");
  for (std::string_view bad : {"", "disk0.img", "=/dev/vdb", "disk0.img=", "disk0=/dev/vdb",
                               "../x.img=/dev/vdb", "x.dir=/srv"}) {
    EXPECT_EQ(CodeOf(ParseArchiveSpec(bad)), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace cairn::backup
