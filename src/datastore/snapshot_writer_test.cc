#include "datastore/snapshot_writer.h"

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "tests/unit_test_util.h"

namespace cairn::datastore {
namespace {

using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z

class SnapshotWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(Datastore::Init(*env_, dir_.path()));
    auto store = Datastore::Open(*env_, dir_.path());
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  size_t Listed() {
    auto snaps = store_->ListSnapshots(snap_.group);
    EXPECT_TRUE(snaps.ok()) << snaps.status().ToString();
    return snaps.ok() ? snaps->size() : 0;
  }
  bool Exists(const std::string& path) { return env_->Stat(path).ok(); }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::unique_ptr<Datastore> store_;
  SnapshotRef snap_{GroupRef{"", "vm", "100"}, kT0};
};

TEST_F(SnapshotWriterTest, CommitMakesTheSnapshotListed) {
  index::FixedIndex idx(index::kMinChunkSize + 1, index::kMinChunkSize,
                        {crypto::Sha256(AsBytes("a")), crypto::Sha256(AsBytes("b"))});
  {
    auto w = SnapshotWriter::Begin(*store_, snap_);
    CAIRN_ASSERT_OK(w);
    EXPECT_EQ((*w)->snapshot(), snap_);
    CAIRN_ASSERT_OK((*w)->AddImage("disk0.img", idx));
    CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes("memory: 4096\n")));
    EXPECT_EQ(Listed(), 0u);  // not before the manifest is written
    CAIRN_ASSERT_OK((*w)->Commit("cairn-test"));
    EXPECT_EQ(Listed(), 1u);
  }
  EXPECT_EQ(Listed(), 1u);  // the committed writer's destructor keeps it
  std::string dir = store_->SnapshotDir(snap_);
  EXPECT_TRUE(Exists(JoinPath(dir, "disk0.img.fidx")));
  EXPECT_TRUE(Exists(JoinPath(dir, "vm.conf.blob")));
  auto names = env_->ListDir(dir);
  CAIRN_ASSERT_OK(names);
  for (const auto& n : *names) EXPECT_EQ(n.find(".tmp"), std::string::npos) << n;

  auto m = store_->ReadManifest(snap_);
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->created_by, "cairn-test");
  EXPECT_EQ(m->type, "vm");
  EXPECT_EQ(m->id, "100");
  ASSERT_EQ(m->archives.size(), 2u);
  const index::ArchiveEntry* disk = m->Find("disk0.img");
  ASSERT_NE(disk, nullptr);
  EXPECT_EQ(disk->size, idx.image_size());
  EXPECT_EQ(disk->chunk_size, idx.chunk_size());
  EXPECT_EQ(disk->csum, idx.csum());
  auto blob = store_->ReadBlobArchive(snap_, *m->Find("vm.conf.blob"));
  CAIRN_ASSERT_OK(blob);
  EXPECT_EQ(AsStringView(*blob), "memory: 4096\n");
}

TEST_F(SnapshotWriterTest, NamespacedSnapshot) {
  SnapshotRef snap{GroupRef{"site/rack", "ct", "9"}, kT0};
  auto w = SnapshotWriter::Begin(*store_, snap);
  CAIRN_ASSERT_OK(w);
  CAIRN_ASSERT_OK((*w)->AddBlob("a.blob", AsBytes("x")));
  CAIRN_ASSERT_OK((*w)->Commit("t"));
  auto m = store_->ReadManifest(snap);
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->ns, "site/rack");
  EXPECT_TRUE(Exists(dir_.Join("ns/site/ns/rack/ct/9/2026-11-30T05:00:00Z/index.json.blob")));
}

TEST_F(SnapshotWriterTest, UncommittedWriterRemovesItsDirectory) {
  std::string dir = store_->SnapshotDir(snap_);
  {
    auto w = SnapshotWriter::Begin(*store_, snap_);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes("x")));
    EXPECT_TRUE(Exists(dir));
  }
  EXPECT_FALSE(Exists(dir));
  EXPECT_EQ(Listed(), 0u);
  // The lock was released with the writer.
  auto again = SnapshotWriter::Begin(*store_, snap_);
  CAIRN_EXPECT_OK(again);
}

TEST_F(SnapshotWriterTest, SecondWriterOfTheGroupIsAborted) {
  auto first = SnapshotWriter::Begin(*store_, snap_);
  CAIRN_ASSERT_OK(first);
  SnapshotRef later{snap_.group, kT0 + 60};
  auto second = SnapshotWriter::Begin(*store_, later);
  EXPECT_EQ(CodeOf(second), StatusCode::kAborted);
  EXPECT_NE(second.status().message().find("vm/100"), std::string_view::npos);
  EXPECT_FALSE(Exists(store_->SnapshotDir(later)));
  // Another group is not blocked.
  CAIRN_EXPECT_OK(SnapshotWriter::Begin(*store_, SnapshotRef{GroupRef{"", "vm", "101"}, kT0}));
  first->reset();
  CAIRN_EXPECT_OK(SnapshotWriter::Begin(*store_, later));
}

TEST_F(SnapshotWriterTest, ExistingFinishedSnapshotIsAlreadyExists) {
  {
    auto w = SnapshotWriter::Begin(*store_, snap_);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes("original")));
    CAIRN_ASSERT_OK((*w)->Commit("t"));
  }
  auto again = SnapshotWriter::Begin(*store_, snap_);
  EXPECT_EQ(CodeOf(again), StatusCode::kAlreadyExists);
  // ...and the finished one is untouched.
  auto m = store_->ReadManifest(snap_);
  CAIRN_ASSERT_OK(m);
  auto blob = store_->ReadBlobArchive(snap_, m->archives[0]);
  CAIRN_ASSERT_OK(blob);
  EXPECT_EQ(AsStringView(*blob), "original");
}

TEST_F(SnapshotWriterTest, UnfinishedLeftoverIsReplaced) {
  std::string dir = store_->SnapshotDir(snap_);
  CAIRN_ASSERT_OK(CreateDirs(*env_, dir));
  test_util::WriteFileOrFail(JoinPath(dir, "disk0.img.fidx.tmp"), AsBytes("half"));
  test_util::WriteFileOrFail(JoinPath(dir, "old.blob"), AsBytes("stale"));
  EXPECT_EQ(Listed(), 0u);

  auto w = SnapshotWriter::Begin(*store_, snap_);
  CAIRN_ASSERT_OK(w);
  EXPECT_FALSE(Exists(JoinPath(dir, "old.blob")));
  EXPECT_FALSE(Exists(JoinPath(dir, "disk0.img.fidx.tmp")));
  CAIRN_ASSERT_OK((*w)->AddBlob("new.blob", AsBytes("fresh")));
  CAIRN_ASSERT_OK((*w)->Commit("t"));
  auto m = store_->ReadManifest(snap_);
  CAIRN_ASSERT_OK(m);
  ASSERT_EQ(m->archives.size(), 1u);
  EXPECT_EQ(m->archives[0].name, "new.blob");
}

TEST_F(SnapshotWriterTest, RejectsDuplicateAndOversizedArchives) {
  auto w = SnapshotWriter::Begin(*store_, snap_);
  CAIRN_ASSERT_OK(w);
  CAIRN_ASSERT_OK((*w)->AddBlob("a.blob", AsBytes("1")));
  EXPECT_EQ(CodeOf((*w)->AddBlob("a.blob", AsBytes("2"))), StatusCode::kInvalidArgument);
  index::FixedIndex idx(0, index::kMinChunkSize, {});
  CAIRN_ASSERT_OK((*w)->AddImage("d.img", idx));
  EXPECT_EQ(CodeOf((*w)->AddImage("d.img", idx)), StatusCode::kInvalidArgument);
  Bytes too_big(blob::kMaxRawSize + 1, 0);
  EXPECT_EQ(CodeOf((*w)->AddBlob("big.blob", too_big)), StatusCode::kInvalidArgument);
  CAIRN_ASSERT_OK((*w)->Commit("t"));
  auto m = store_->ReadManifest(snap_);
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->archives.size(), 2u);
}

TEST_F(SnapshotWriterTest, RemoveSnapshotDir) {
  std::string dir = dir_.Join("leftover");
  CAIRN_ASSERT_OK(env_->CreateDir(dir));
  test_util::WriteFileOrFail(JoinPath(dir, "a"), AsBytes("1"));
  test_util::WriteFileOrFail(JoinPath(dir, "b"), AsBytes("2"));
  CAIRN_ASSERT_OK(RemoveSnapshotDir(*env_, dir));
  EXPECT_FALSE(Exists(dir));
  EXPECT_EQ(CodeOf(RemoveSnapshotDir(*env_, dir)), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::datastore
