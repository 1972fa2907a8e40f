#include "restore/restore.h"

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"

namespace cairn::restore {
namespace {

using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

class RunRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.Join("store")));
    auto store = datastore::Datastore::Open(*env_, dir_.Join("store"));
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    old_image_ = test_util::RandomBytes(3 * kChunk + 10, 1);
    new_image_ = test_util::RandomBytes(2 * kChunk, 2);
    Commit(kT0, old_image_, "old config");
    Commit(kT0 + 60, new_image_, "new config");
  }

  void Commit(int64_t time, const Bytes& image, std::string_view conf) {
    std::vector<crypto::Digest> ids;
    for (uint64_t off = 0; off < image.size(); off += kChunk) {
      ByteSpan plain(image.data() + off, std::min<uint64_t>(kChunk, image.size() - off));
      ids.push_back(crypto::Sha256(plain));
      auto stored = blob::Encode(plain);
      ASSERT_TRUE(stored.ok());
      CAIRN_ASSERT_OK(store_->chunks().Insert(ids.back(), *stored));
    }
    auto w = datastore::SnapshotWriter::Begin(*store_, {group_, time});
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK(
        (*w)->AddImage("disk0.img", index::FixedIndex(image.size(), kChunk, std::move(ids))));
    CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes(conf)));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }

  RestoreRequest Request(std::string archive, std::string target, bool latest = true) {
    RestoreRequest r;
    r.snapshot = datastore::SnapshotSpec{group_, latest, latest ? 0 : kT0};
    r.archive = std::move(archive);
    r.target = std::move(target);
    return r;
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::unique_ptr<datastore::Datastore> store_;
  datastore::GroupRef group_{"", "vm", "100"};
  Bytes old_image_;
  Bytes new_image_;
};

TEST_F(RunRestoreTest, RestoresLatestAndExactSnapshots) {
  auto latest = RunRestore(*store_, Request("disk0.img", dir_.Join("latest.raw")));
  CAIRN_ASSERT_OK(latest);
  EXPECT_EQ(latest->snapshot.time, kT0 + 60);
  EXPECT_EQ(latest->archives.at(0).stats.bytes, new_image_.size());
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("latest.raw")), new_image_);

  auto exact = RunRestore(*store_, Request("disk0.img", dir_.Join("old.raw"), false));
  CAIRN_ASSERT_OK(exact);
  EXPECT_EQ(exact->snapshot.time, kT0);
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("old.raw")), old_image_);
}

TEST_F(RunRestoreTest, RestoresBlobArchives) {
  auto r = RunRestore(*store_, Request("vm.conf.blob", dir_.Join("vm.conf"), false));
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(dir_.Join("vm.conf"))), "old config");
  EXPECT_EQ(r->archives.at(0).stats.bytes, 10u);
  // Existing target: refused without overwrite, replaced with it.
  EXPECT_EQ(CodeOf(RunRestore(*store_, Request("vm.conf.blob", dir_.Join("vm.conf")))),
            StatusCode::kAlreadyExists);
  RestoreRequest over = Request("vm.conf.blob", dir_.Join("vm.conf"));
  over.overwrite = true;
  CAIRN_ASSERT_OK(RunRestore(*store_, over));
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(dir_.Join("vm.conf"))), "new config");
}

TEST_F(RunRestoreTest, ErrorsNameSnapshotArchiveAndTarget) {
  auto missing_archive = RunRestore(*store_, Request("disk1.img", dir_.Join("x")));
  EXPECT_EQ(CodeOf(missing_archive), StatusCode::kNotFound);
  EXPECT_NE(missing_archive.status().message().find("disk0.img, vm.conf.blob"),
            std::string_view::npos)
      << missing_archive.status().ToString();

  RestoreRequest no_group = Request("disk0.img", dir_.Join("x"));
  no_group.snapshot.group.id = "999";
  EXPECT_EQ(CodeOf(RunRestore(*store_, no_group)), StatusCode::kNotFound);

  // Damage a chunk only the latest snapshot has.
  crypto::Digest id = crypto::Sha256(ByteSpan(new_image_.data(), kChunk));
  std::string path = store_->chunks().ChunkPath(id);
  Bytes stored = test_util::ReadFileOrFail(path);
  stored[100] ^= 0x08;
  test_util::WriteFileOrFail(path, stored);
  std::string target = dir_.Join("damaged.raw");
  auto damaged = RunRestore(*store_, Request("disk0.img", target));
  EXPECT_EQ(CodeOf(damaged), StatusCode::kDataLoss);
  std::string_view msg = damaged.status().message();
  EXPECT_NE(msg.find("vm/100/2026-11-30T05:01:00Z"), std::string_view::npos) << msg;
  EXPECT_NE(msg.find("disk0.img"), std::string_view::npos) << msg;
  EXPECT_NE(msg.find(target), std::string_view::npos) << msg;
  EXPECT_NE(msg.find(crypto::DigestHex(id)), std::string_view::npos) << msg;
  EXPECT_FALSE(env_->Stat(target).ok());
  EXPECT_FALSE(env_->Stat(target + ".partial").ok());
}

TEST_F(RunRestoreTest, CorruptIndexIsDataLoss) {
  std::string fidx =
      JoinPath(store_->SnapshotDir({group_, kT0 + 60}), "disk0.img.fidx");
  Bytes file = test_util::ReadFileOrFail(fidx);
  file[4096] ^= 1;
  test_util::WriteFileOrFail(fidx, file);
  auto r = RunRestore(*store_, Request("disk0.img", dir_.Join("x.raw")));
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_FALSE(env_->Stat(dir_.Join("x.raw")).ok());
}

}  // namespace
}  // namespace cairn::restore
