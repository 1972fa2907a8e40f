// A full disk (ENOSPC) during backup, restore and gc, and failed reads (EIO)
// of chunks, indexes and manifests, injected through FaultInjectionEnv into
// a local datastore holding a snapshot of an image and a tree:
//   - the error is clear (names the path and says why) and maps to the exit
//     code the CLI gives it: 1 for a full disk, 3 where data is damaged;
//   - nothing stored before is damaged: every snapshot restores byte for
//     byte and verifies once the fault is gone;
//   - the same run succeeds once there is space again.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "backup/backup.h"
#include "base/fault_injection_env.h"
#include "datastore/datastore.h"
#include "maintenance/gc.h"
#include "maintenance/prune.h"
#include "restore/restore.h"
#include "tests/unit_test_util.h"
#include "verify/verify.h"

namespace cairn::maintenance {
namespace {

namespace fs = std::filesystem;
using test_util::CodeOf;

constexpr int64_t kT1 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr int64_t kT2 = kT1 + 3600;
constexpr uint32_t kChunk = index::kMinChunkSize;

// The exit code `cairn` gives an error (cli/cli_util.cc, ExitCodeFor).
int ExitCode(const Status& s) {
  if (s.ok()) return 0;
  if (s.code() == StatusCode::kDataLoss) return 3;
  if (s.code() == StatusCode::kInvalidArgument) return 2;
  return 1;
}

std::map<std::string, std::string> TreeContents(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    std::string rel = fs::relative(e.path(), root).string();
    out[rel] = e.is_directory()
                   ? "<dir>"
                   : std::string(AsStringView(test_util::ReadFileOrFail(e.path().string())));
  }
  return out;
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

class IoErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_path_ = dir_.Join("store");
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*posix_, store_path_));
    auto store = datastore::Datastore::Open(env_, store_path_);
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    image_ = dir_.Join("image");
    Bytes data = test_util::RandomBytes(6 * kChunk + 300, 10);
    test_util::WriteFileOrFail(image_, data);
    tree_ = dir_.Join("tree");
    fs::create_directories(tree_ + "/etc");
    test_util::WriteFileOrFail(tree_ + "/etc/hosts", AsBytes("127.0.0.1 localhost\n"));
    test_util::WriteFileOrFail(tree_ + "/big", test_util::RandomBytes(3 * kChunk + 77, 31));
    uint64_t before = env_.bytes_written();
    CAIRN_ASSERT_OK(Backup(kT1));
    first_backup_bytes_ = env_.bytes_written() - before;
  }

  // Backs up image_ and tree_ as they are now (the sources of `time`).
  Status Backup(int64_t time) {
    sources_[time] = {test_util::ReadFileOrFail(image_), TreeContents(tree_)};
    backup::BackupOptions o;
    o.group = group_;
    o.time = time;
    o.archives = {{"disk0.img", image_}, {"root.tree", tree_}};
    o.image.chunk_size = kChunk;
    o.image.workers = 2;
    o.tree.xattrs = false;
    o.logger = logger_.get();
    o.tree.logger = logger_.get();
    return backup::RunBackup(*store_, o).status();
  }

  Status Restore(int64_t time, const std::string& out) {
    restore::RestoreRequest r;
    r.snapshot = {group_, false, time};
    r.target = out;
    r.all = true;
    return restore::RunRestore(*store_, r).status();
  }

  // Every snapshot listed is one of `times`, restores byte for byte (to
  // what its backup read) and verifies.
  void ExpectIntact(std::vector<int64_t> times) {
    auto snaps = store_->ListSnapshots(group_);
    CAIRN_ASSERT_OK(snaps);
    ASSERT_EQ(snaps->size(), times.size());
    for (size_t i = 0; i < times.size(); ++i) {
      ASSERT_EQ((*snaps)[i].time, times[i]);
      std::string out = dir_.Join(fmt::format("check-{}", times[i]));
      fs::remove_all(out);
      CAIRN_ASSERT_OK(Restore(times[i], out));
      EXPECT_TRUE(test_util::ReadFileOrFail(out + "/disk0.img") == sources_[times[i]].image)
          << times[i];
      EXPECT_TRUE(TreeContents(out + "/root") == sources_[times[i]].tree) << times[i];
    }
    verify::VerifyOptions o;
    o.logger = logger_.get();
    auto report = verify::RunVerify(*store_, o);
    CAIRN_ASSERT_OK(report);
    ASSERT_TRUE(report->ok()) << report->problems.front().what << ": "
                              << report->problems.front().error;
  }

  // The first chunk of the image archive of the snapshot at `time`.
  crypto::Digest FirstImageChunk(int64_t time) {
    datastore::SnapshotRef snap{group_, time};
    auto manifest = store_->ReadManifest(snap);
    EXPECT_TRUE(manifest.ok());
    auto idx = store_->ReadImageIndex(snap, *manifest->Find("disk0.img"));
    EXPECT_TRUE(idx.ok()) << idx.status().ToString();
    return idx.ok() ? idx->digest(0) : crypto::Digest{};
  }

  std::unique_ptr<Env> posix_ = NewPosixEnv();
  FaultInjectionEnv env_{posix_.get()};
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::string store_path_;
  std::unique_ptr<datastore::Datastore> store_;
  datastore::GroupRef group_{"", "vm", "100"};
  std::string image_;
  std::string tree_;
  uint64_t first_backup_bytes_ = 0;
  struct Sources {
    Bytes image;
    std::map<std::string, std::string> tree;
  };
  std::map<int64_t, Sources> sources_;
};

TEST_F(IoErrorTest, BackupOntoAFullDiskFailsCleanlyAtEveryFillLevel) {
  // New data, so the second backup writes chunks, indexes and a manifest.
  test_util::WriteFileOrFail(image_, test_util::RandomBytes(6 * kChunk + 300, 11));
  test_util::WriteFileOrFail(tree_ + "/big", test_util::RandomBytes(3 * kChunk + 77, 32));
  int failures = 0;
  for (int k = 0; k < 8; ++k) {
    SCOPED_TRACE(fmt::format("disk full after {}/8 of a backup's bytes", k));
    env_.SetWriteBudget(static_cast<int64_t>(first_backup_bytes_ * k / 8));
    Status s = Backup(kT2);
    env_.SetWriteBudget(-1);
    if (s.ok()) break;  // enough space: the end of the sweep
    ++failures;
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_EQ(ExitCode(s), 1);
    EXPECT_TRUE(Contains(s.message(), "No space left on device")) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), store_path_)) << s.ToString();  // names the path
    auto snaps = store_->ListSnapshots(group_);
    CAIRN_ASSERT_OK(snaps);
    ASSERT_EQ(snaps->size(), 1u);  // no partial snapshot
    EXPECT_FALSE(posix_->Stat(store_->SnapshotDir({group_, kT2})).ok());
  }
  EXPECT_GE(failures, 3);
  if (failures == 8) CAIRN_ASSERT_OK(Backup(kT2));  // space again: the same backup works
  ExpectIntact({kT1, kT2});
}

TEST_F(IoErrorTest, RestoreOntoAFullDiskFailsCleanly) {
  std::string out = dir_.Join("out");
  for (int64_t budget : {int64_t{0}, int64_t{kChunk} + 10, int64_t{5} * kChunk}) {
    SCOPED_TRACE(budget);
    fs::remove_all(out);
    env_.SetWriteBudget(budget);
    Status s = Restore(kT1, out);
    env_.SetWriteBudget(-1);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
    EXPECT_EQ(ExitCode(s), 1);
    EXPECT_TRUE(Contains(s.message(), "No space left on device")) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), out)) << s.ToString();
    EXPECT_FALSE(fs::exists(out + "/disk0.img"));  // no half-written image under its name
  }
  fs::remove_all(out);
  ExpectIntact({kT1});  // restores with space
}

TEST_F(IoErrorTest, GcOnAFullDiskRemovesNothingAndWorksAfterwards) {
  // A second snapshot of other data, the first forgotten: gc has chunks to remove.
  test_util::WriteFileOrFail(image_, test_util::RandomBytes(6 * kChunk + 300, 12));
  CAIRN_ASSERT_OK(Backup(kT2));
  PruneOptions prune;
  prune.keep.last = 1;
  CAIRN_ASSERT_OK(Prune(*store_, "", group_, prune));
  GcOptions gc;
  gc.grace_seconds = 0;
  gc.logger = logger_.get();
  env_.SetWriteBudget(0);
  auto failed = RunGc(*store_, gc);
  env_.SetWriteBudget(-1);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(CodeOf(failed), StatusCode::kResourceExhausted);
  EXPECT_EQ(ExitCode(failed.status()), 1);
  EXPECT_TRUE(Contains(failed.status().message(), ".gc/running")) << failed.status().ToString();
  ExpectIntact({kT2});
  auto done = RunGc(*store_, gc);
  CAIRN_ASSERT_OK(done);
  EXPECT_GT(done->removed_chunks, 0u);
  ExpectIntact({kT2});
}

TEST_F(IoErrorTest, UnreadableChunkIsCorruptionAndHealsWithTheNextBackup) {
  const std::string hex = crypto::DigestHex(FirstImageChunk(kT1));
  env_.FailReadsMatching(hex);
  Status s = Restore(kT1, dir_.Join("out"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_EQ(ExitCode(s), 3);
  EXPECT_TRUE(Contains(s.message(), hex)) << s.ToString();
  EXPECT_TRUE(Contains(s.message(), "Input/output error")) << s.ToString();

  verify::VerifyOptions o;
  o.logger = logger_.get();
  auto report = verify::RunVerify(*store_, o);
  CAIRN_ASSERT_OK(report);  // verify ran; what it found is in the report
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_TRUE(Contains(report->problems[0].what, hex.substr(0, 8))) << report->problems[0].what;
  EXPECT_TRUE(Contains(report->problems[0].error, "Input/output error"));
  EXPECT_TRUE(Contains(report->problems[0].error, "not quarantined"));
  EXPECT_FALSE(report->snapshots[0].ok);
  // An I/O error proves nothing about the bytes: the chunk stays in place.
  const std::string path = store_->chunks().ChunkPath(FirstImageChunk(kT1));
  EXPECT_TRUE(posix_->Stat(path).ok()) << path;
  EXPECT_FALSE(posix_->Stat(path + ".bad").ok()) << path;

  // Readable again: the next backup and every snapshot work.
  env_.FailReadsMatching("");
  CAIRN_ASSERT_OK(Backup(kT2));
  ExpectIntact({kT1, kT2});
}

TEST_F(IoErrorTest, UnreadableIndexIsCorruptionAndGcRemovesNothing) {
  env_.FailReadsMatching(".fidx");
  Status s = Restore(kT1, dir_.Join("out"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_EQ(ExitCode(s), 3);
  EXPECT_TRUE(Contains(s.message(), "disk0.img.fidx")) << s.ToString();

  verify::VerifyOptions o;
  o.logger = logger_.get();
  auto report = verify::RunVerify(*store_, o);
  CAIRN_ASSERT_OK(report);
  ASSERT_FALSE(report->ok());
  EXPECT_TRUE(Contains(report->problems[0].error, "Input/output error"))
      << report->problems[0].error;

  // gc must not take a snapshot it cannot read for one that references nothing.
  GcOptions gc;
  gc.grace_seconds = 0;
  gc.logger = logger_.get();
  auto failed = RunGc(*store_, gc);
  ASSERT_FALSE(failed.ok()) << "gc ran without reading every snapshot; removed "
                            << failed->removed_chunks << " chunks";
  EXPECT_NE(ExitCode(failed.status()), 0);
  EXPECT_TRUE(Contains(failed.status().message(), "Input/output error"))
      << failed.status().ToString();
  env_.FailReadsMatching("");
  ExpectIntact({kT1});
}

TEST_F(IoErrorTest, UnreadableManifestIsCorruptionAndGcRemovesNothing) {
  env_.FailReadsMatching("index.json.blob");
  Status s = Restore(kT1, dir_.Join("out"));
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_EQ(ExitCode(s), 3);
  EXPECT_TRUE(Contains(s.message(), "index.json.blob")) << s.ToString();

  verify::VerifyOptions o;
  o.logger = logger_.get();
  auto report = verify::RunVerify(*store_, o);
  if (report.ok()) {
    EXPECT_FALSE(report->ok());
  } else {
    EXPECT_EQ(ExitCode(report.status()), 3) << report.status().ToString();
  }

  GcOptions gc;
  gc.grace_seconds = 0;
  gc.logger = logger_.get();
  auto failed = RunGc(*store_, gc);
  ASSERT_FALSE(failed.ok()) << "gc ran without reading every snapshot; removed "
                            << failed->removed_chunks << " chunks";
  EXPECT_NE(ExitCode(failed.status()), 0);
  EXPECT_TRUE(Contains(failed.status().message(), "Input/output error"))
      << failed.status().ToString();
  env_.FailReadsMatching("");
  ExpectIntact({kT1});
}

}  // namespace
}  // namespace cairn::maintenance
