#include "base/power_loss_env.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tests/unit_test_util.h"

namespace cairn {
namespace {

using Metadata = PowerLossEnv::Metadata;
using test_util::CodeOf;

class PowerLossEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(posix_->CreateDir(root_));
    CAIRN_ASSERT_OK(env_.Start());
  }

  std::string P(std::string_view name) const { return JoinPath(root_, name); }

  // Writes `text` to `path` through the env; fsyncs it when `sync`.
  void Write(const std::string& path, std::string_view text, bool sync,
             OpenMode mode = OpenMode::kTruncate) {
    auto f = env_.OpenWritable(path, mode);
    CAIRN_ASSERT_OK(f);
    CAIRN_ASSERT_OK((*f)->Append(AsBytes(text)));
    if (sync) CAIRN_ASSERT_OK((*f)->Sync());
    CAIRN_ASSERT_OK((*f)->Close());
  }

  // What the disk shows: the file's contents, or "<absent>".
  std::string Read(const std::string& path) {
    auto data = ReadWholeFile(*posix_, path, 1 << 20);
    if (!data.ok()) return "<absent>";
    return std::string(AsStringView(*data));
  }

  void CutAndRemount(Metadata m) {
    env_.CutNow();
    CAIRN_ASSERT_OK(env_.Remount(m));
  }

  std::unique_ptr<Env> posix_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::string root_ = dir_.Join("root");
  PowerLossEnv env_{posix_.get(), root_};
};

// Directory handles are for tree sources and targets outside the modelled
// root: passed through there, refused under root and after the cut.
TEST_F(PowerLossEnvTest, DirectoryHandlesPassThroughOutsideRootOnly) {
  CAIRN_ASSERT_OK(env_.OpenDir(dir_.path()));
  EXPECT_EQ(CodeOf(env_.OpenDir(root_)), StatusCode::kFailedPrecondition);
  env_.CutNow();
  EXPECT_FALSE(env_.OpenDir(dir_.path()).ok());
}

TEST_F(PowerLossEnvTest, WhatWasThereAtStartSurvives) {
  test_util::WriteFileOrFail(P("old"), AsBytes("before"));
  CAIRN_ASSERT_OK(env_.Start());
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("old")), "before");
}

TEST_F(PowerLossEnvTest, FsyncedFileInSyncedDirectorySurvives) {
  Write(P("a"), "hello", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "hello");
}

TEST_F(PowerLossEnvTest, UnsyncedContentsAreLostEvenWhenTheEntryIsDurable) {
  Write(P("a"), "hello", /*sync=*/false);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "");  // the entry is there, the data is not
}

TEST_F(PowerLossEnvTest, ContentsWrittenAfterTheFsyncAreLost) {
  auto f = env_.OpenWritable(P("a"), OpenMode::kTruncate);
  CAIRN_ASSERT_OK(f);
  CAIRN_ASSERT_OK((*f)->WriteAt(0, AsBytes("12345")));
  CAIRN_ASSERT_OK((*f)->Sync());
  CAIRN_ASSERT_OK((*f)->WriteAt(2, AsBytes("xyz!")));
  CAIRN_ASSERT_OK((*f)->Close());
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  EXPECT_EQ(Read(P("a")), "12xyz!");  // before the cut the system sees it all
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "12345");
}

TEST_F(PowerLossEnvTest, CreateWithoutDirectorySyncVanishes) {
  Write(P("a"), "hello", /*sync=*/true);
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "<absent>");
}

TEST_F(PowerLossEnvTest, CreateWithoutDirectorySyncSurvivesWhenTheJournalCommitted) {
  Write(P("a"), "hello", /*sync=*/true);
  Write(P("b"), "unsynced", /*sync=*/false);
  CutAndRemount(Metadata::kAllMetadata);
  EXPECT_EQ(Read(P("a")), "hello");
  EXPECT_EQ(Read(P("b")), "");  // the entry made it, its data did not
}

TEST_F(PowerLossEnvTest, UnsyncedRenameReverts) {
  Write(P("a"), "old", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  Write(P("a.tmp"), "new", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.Rename(P("a.tmp"), P("a")));
  EXPECT_EQ(Read(P("a")), "new");
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "old");
  EXPECT_EQ(Read(P("a.tmp")), "<absent>");  // its create was never durable either
}

TEST_F(PowerLossEnvTest, SyncedRenameSticks) {
  Write(P("a"), "old", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  Write(P("a.tmp"), "new", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.Rename(P("a.tmp"), P("a")));
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "new");
  EXPECT_EQ(Read(P("a.tmp")), "<absent>");
}

TEST_F(PowerLossEnvTest, RenameOfAnUnsyncedFileLeavesItEmpty) {
  // The classic: write, rename over, no fsync of the file.
  Write(P("a"), "old", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  Write(P("a.tmp"), "new", /*sync=*/false);
  CAIRN_ASSERT_OK(env_.Rename(P("a.tmp"), P("a")));
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "");
}

TEST_F(PowerLossEnvTest, UnsyncedUnlinkReverts) {
  Write(P("a"), "keep", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CAIRN_ASSERT_OK(env_.RemoveFile(P("a")));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "keep");

  CAIRN_ASSERT_OK(env_.RemoveFile(P("a")));
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("a")), "<absent>");
}

TEST_F(PowerLossEnvTest, NewDirectoryNeedsItsParentSynced) {
  CAIRN_ASSERT_OK(env_.CreateDir(P("d")));
  Write(P("d/f"), "x", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(P("d")));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_FALSE(std::filesystem::exists(P("d")));

  CAIRN_ASSERT_OK(env_.CreateDir(P("d")));
  CAIRN_ASSERT_OK(env_.SyncDir(root_));  // the directory, but not its entries
  Write(P("d/f"), "x", /*sync=*/true);
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_TRUE(std::filesystem::is_directory(P("d")));
  EXPECT_EQ(Read(P("d/f")), "<absent>");
}

TEST_F(PowerLossEnvTest, RemovedDirectoryComesBackUntilItsParentIsSynced) {
  CAIRN_ASSERT_OK(env_.CreateDir(P("d")));
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  CAIRN_ASSERT_OK(env_.RemoveDir(P("d")));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_TRUE(std::filesystem::is_directory(P("d")));
}

TEST_F(PowerLossEnvTest, SyncFilesystemMakesEverythingDurable) {
  CAIRN_ASSERT_OK(env_.CreateDir(P("d")));
  Write(P("d/f"), "data", /*sync=*/false);
  Write(P("g"), "more", /*sync=*/false);
  CAIRN_ASSERT_OK(env_.Rename(P("g"), P("h")));
  CAIRN_ASSERT_OK(env_.SyncFilesystem(root_));
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("d/f")), "data");
  EXPECT_EQ(Read(P("h")), "more");
  EXPECT_EQ(Read(P("g")), "<absent>");
}

TEST_F(PowerLossEnvTest, AppendsAreDurableUpToTheLastFsync) {
  Write(P("log"), "one,", /*sync=*/true, OpenMode::kAppend);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  Write(P("log"), "two,", /*sync=*/true, OpenMode::kAppend);
  Write(P("log"), "three,", /*sync=*/false, OpenMode::kAppend);
  EXPECT_EQ(Read(P("log")), "one,two,three,");
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("log")), "one,two,");
}

TEST_F(PowerLossEnvTest, TornTailKeepsAPageAlignedPrefixOfWhatGrew) {
  const std::string page_data(4096 * 3 + 100, 'p');
  std::set<size_t> sizes;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    Write(P("grown"), "synced|", /*sync=*/true, OpenMode::kAppend);
    CAIRN_ASSERT_OK(env_.SyncDir(root_));
    Write(P("grown"), page_data, /*sync=*/false, OpenMode::kAppend);
    Write(P("rewritten"), "synced", /*sync=*/true);
    CAIRN_ASSERT_OK(env_.SyncDir(root_));
    Write(P("rewritten"), "OTHER!!", /*sync=*/false);  // not a growth: never torn
    env_.CutNow();
    CAIRN_ASSERT_OK(env_.Remount(Metadata::kSyncedOnly, PowerLossEnv::Data::kTornTail, seed));
    std::string got = Read(P("grown"));
    ASSERT_EQ(got.substr(0, 7), "synced|");
    ASSERT_EQ(got.substr(7), page_data.substr(0, got.size() - 7));
    ASSERT_TRUE((got.size() - 7) % 4096 == 0 || got.size() == 7 + page_data.size()) << got.size();
    sizes.insert(got.size());
    EXPECT_EQ(Read(P("rewritten")), "synced");
    CAIRN_ASSERT_OK(env_.RemoveFile(P("grown")));
    CAIRN_ASSERT_OK(env_.SyncDir(root_));
  }
  EXPECT_EQ(sizes.size(), 5u);  // 0, 1, 2 or 3 new pages, or all of it: each seen
}

TEST_F(PowerLossEnvTest, TruncateIsDurableOnlyWithTheFsync) {
  Write(P("j"), "records", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  {
    auto f = env_.OpenWritable(P("j"), OpenMode::kAppend);
    CAIRN_ASSERT_OK(f);
    CAIRN_ASSERT_OK((*f)->Truncate(0));
    CAIRN_ASSERT_OK((*f)->Close());
  }
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(P("j")), "records");
}

TEST_F(PowerLossEnvTest, AccessTimeFollowsTheContents) {
  Write(P("c"), "chunk", /*sync=*/true);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));
  const int64_t t1 = int64_t{1700000000} * 1000000000;
  const int64_t t2 = t1 + int64_t{3600} * 1000000000;
  CAIRN_ASSERT_OK(env_.SetAccessTime(P("c"), t1));
  CAIRN_ASSERT_OK(env_.SyncFilesystem(root_));
  CAIRN_ASSERT_OK(env_.SetAccessTime(P("c"), t2));
  CutAndRemount(Metadata::kSyncedOnly);
  auto info = posix_->Stat(P("c"));
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->atime_ns, t1);
}

TEST_F(PowerLossEnvTest, LockFilesAreCreatesToo) {
  auto held = env_.TryLock(P("lock"), /*exclusive=*/true);
  CAIRN_ASSERT_OK(held);
  held->reset();
  CutAndRemount(Metadata::kAllMetadata);
  EXPECT_EQ(Read(P("lock")), "");
  CutAndRemount(Metadata::kSyncedOnly);  // nothing was synced since the last remount
  EXPECT_EQ(Read(P("lock")), "");
}

TEST_F(PowerLossEnvTest, CutBeforeOpStopsThatCallAndEveryLaterOne) {
  Write(P("a"), "x", /*sync=*/true);  // ops 1-3: open, write, fsync
  EXPECT_EQ(env_.ops(), 3u);
  EXPECT_EQ(env_.sync_ops(), 1u);
  env_.CutBeforeOp(5);
  CAIRN_ASSERT_OK(env_.SyncDir(root_));  // op 4
  EXPECT_FALSE(env_.is_cut());
  Status s = env_.CreateDir(P("d"));  // op 5: the power fails instead
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("power cut"), std::string_view::npos) << s.ToString();
  EXPECT_TRUE(env_.is_cut());
  EXPECT_FALSE(std::filesystem::exists(P("d")));
  // Everything fails now, reads and paths outside root included.
  EXPECT_EQ(CodeOf(env_.OpenReadable(P("a"))), StatusCode::kAborted);
  EXPECT_EQ(CodeOf(env_.ListDir(root_)), StatusCode::kAborted);
  EXPECT_EQ(CodeOf(env_.OpenWritable(dir_.Join("outside"), OpenMode::kTruncate)),
            StatusCode::kAborted);
  CAIRN_ASSERT_OK(env_.Remount(Metadata::kSyncedOnly));
  EXPECT_FALSE(env_.is_cut());
  EXPECT_EQ(env_.ops(), 0u);
  EXPECT_EQ(Read(P("a")), "x");
  CAIRN_EXPECT_OK(env_.CreateDir(P("d")));  // alive again, no cut armed
}

TEST_F(PowerLossEnvTest, StartAgainCountsFromZero) {
  Write(P("a"), "x", /*sync=*/true);
  env_.CutBeforeOp(10);
  CAIRN_ASSERT_OK(env_.Start());
  EXPECT_EQ(env_.ops(), 0u);
  EXPECT_EQ(env_.sync_ops(), 0u);
  env_.CutBeforeSync(2);
  Write(P("b"), "y", /*sync=*/true);  // sync 1
  EXPECT_FALSE(env_.is_cut());
  EXPECT_EQ(CodeOf(env_.SyncDir(root_)), StatusCode::kAborted);  // sync 2
}

TEST_F(PowerLossEnvTest, CutBeforeSyncCountsOnlySyncs) {
  env_.CutBeforeSync(2);
  Write(P("a"), "x", /*sync=*/true);  // sync 1
  CAIRN_ASSERT_OK(env_.Rename(P("a"), P("b")));
  EXPECT_EQ(CodeOf(env_.SyncDir(root_)), StatusCode::kAborted);  // sync 2
  CAIRN_ASSERT_OK(env_.Remount(Metadata::kAllMetadata));
  EXPECT_EQ(Read(P("b")), "x");
  EXPECT_EQ(Read(P("a")), "<absent>");
}

TEST_F(PowerLossEnvTest, PathsOutsideRootPassThrough) {
  std::string outside = dir_.Join("outside");
  Write(outside, "free", /*sync=*/false);
  EXPECT_EQ(env_.ops(), 0u);
  CutAndRemount(Metadata::kSyncedOnly);
  EXPECT_EQ(Read(outside), "free");
}

TEST_F(PowerLossEnvTest, WriteFileAtomicIsAtomicAcrossACut) {
  CAIRN_ASSERT_OK(WriteFileAtomic(env_, P("state"), AsBytes("v1")));
  const uint64_t ops_per_write = env_.ops();
  for (uint64_t cut = 1; cut <= ops_per_write + 1; ++cut) {
    for (Metadata m : {Metadata::kSyncedOnly, Metadata::kAllMetadata}) {
      CAIRN_ASSERT_OK(env_.Remount(Metadata::kSyncedOnly));
      ASSERT_EQ(Read(P("state")), "v1");
      env_.CutBeforeOp(cut);
      WriteFileAtomic(env_, P("state"), AsBytes("v2")).IgnoreError();
      env_.CutNow();
      CAIRN_ASSERT_OK(env_.Remount(m));
      std::string got = Read(P("state"));
      EXPECT_TRUE(got == "v1" || got == "v2") << "cut before op " << cut << ": " << got;
      if (got == "v2") CAIRN_ASSERT_OK(WriteFileAtomic(env_, P("state"), AsBytes("v1")));
    }
  }
}

}  // namespace
}  // namespace cairn
