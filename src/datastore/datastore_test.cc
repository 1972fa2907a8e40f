#include "datastore/datastore.h"

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"

namespace cairn::datastore {
namespace {

using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z

class DatastoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("store");
    CAIRN_ASSERT_OK(Datastore::Init(*env_, path_));
    auto store = Datastore::Open(*env_, path_);
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  // Commits a snapshot holding one small blob archive.
  void Commit(const SnapshotRef& snap, std::string_view content = "config") {
    auto w = SnapshotWriter::Begin(*store_, snap);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes(content)));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::string path_;
  std::unique_ptr<Datastore> store_;
  GroupRef vm100_{"", "vm", "100"};
};

TEST(DatastoreInitTest, InitOnNewPathCreatesParentsAndOpens) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  std::string path = dir.Join("a/b/store");
  CAIRN_ASSERT_OK(Datastore::Init(*env, path));
  auto marker = env->Stat(JoinPath(path, kDatastoreMarker));
  CAIRN_ASSERT_OK(marker);
  EXPECT_TRUE(marker->is_regular);
  auto chunks = env->Stat(JoinPath(path, ".chunks"));
  CAIRN_ASSERT_OK(chunks);
  EXPECT_TRUE(chunks->is_dir);
  auto store = Datastore::Open(*env, path);
  CAIRN_ASSERT_OK(store);
  EXPECT_EQ((*store)->path(), path);
  auto all = (*store)->ListAllSnapshots();
  CAIRN_ASSERT_OK(all);
  EXPECT_TRUE(all->empty());
}

TEST(DatastoreInitTest, InitOnEmptyDirectory) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  CAIRN_ASSERT_OK(Datastore::Init(*env, dir.path()));
  CAIRN_EXPECT_OK(Datastore::Open(*env, dir.path()));
}

TEST(DatastoreInitTest, InitRefusesNonEmptyAndInitialisedDirectories) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  test_util::WriteFileOrFail(dir.Join("precious"), AsBytes("data"));
  Status s = Datastore::Init(*env, dir.path());
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("not empty"), std::string_view::npos) << s.ToString();
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(dir.Join("precious"))), "data");

  std::string path = dir.Join("store");
  CAIRN_ASSERT_OK(Datastore::Init(*env, path));
  s = Datastore::Init(*env, path);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("already a cairn datastore"), std::string_view::npos)
      << s.ToString();

  EXPECT_EQ(CodeOf(Datastore::Init(*env, dir.Join("precious"))), StatusCode::kAlreadyExists);
}

TEST(DatastoreOpenTest, ErrorsForMissingPathAndPlainDirectory) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  auto missing = Datastore::Open(*env, dir.Join("nope"));
  EXPECT_EQ(CodeOf(missing), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string_view::npos);

  auto plain = Datastore::Open(*env, dir.path());
  EXPECT_EQ(CodeOf(plain), StatusCode::kNotFound);
  EXPECT_NE(plain.status().message().find("not a cairn datastore"), std::string_view::npos)
      << plain.status().ToString();

  test_util::WriteFileOrFail(dir.Join("file"), AsBytes("x"));
  EXPECT_EQ(CodeOf(Datastore::Open(*env, dir.Join("file"))), StatusCode::kNotFound);
}

TEST(DatastoreOpenTest, RejectsBadMarkers) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  CAIRN_ASSERT_OK(Datastore::Init(*env, dir.path()));
  std::string marker = dir.Join(kDatastoreMarker);
  const std::pair<std::string, StatusCode> cases[] = {
      {"", StatusCode::kDataLoss},
      {"not json", StatusCode::kDataLoss},
      {"[]", StatusCode::kDataLoss},
      {R"({"version": 1})", StatusCode::kDataLoss},
      {R"({"format": "other", "version": 1})", StatusCode::kDataLoss},
      {R"({"format": 7, "version": 1})", StatusCode::kDataLoss},
      {R"({"format": "cairn-datastore", "version": "1"})", StatusCode::kDataLoss},
      {R"({"format": "cairn-datastore"})", StatusCode::kDataLoss},
      {R"({"format": "cairn-datastore", "version": 2})", StatusCode::kFailedPrecondition},
      {R"({"format": "cairn-datastore", "version": 1e300})", StatusCode::kDataLoss},
      {R"({"format": "cairn-datastore", "version": 4294967297})", StatusCode::kFailedPrecondition},
  };
  for (const auto& [text, code] : cases) {
    test_util::WriteFileOrFail(marker, AsBytes(text));
    EXPECT_EQ(CodeOf(Datastore::Open(*env, dir.path())), code) << text;
  }
  test_util::WriteFileOrFail(marker, AsBytes(R"({"format": "cairn-datastore", "version": 1})"));
  CAIRN_EXPECT_OK(Datastore::Open(*env, dir.path()));
}

TEST(DatastoreOpenTest, MissingChunkDirectoryIsNotADatastore) {
  auto env = NewPosixEnv();
  test_util::TempDir dir;
  test_util::WriteFileOrFail(dir.Join(kDatastoreMarker),
                             AsBytes(R"({"format": "cairn-datastore", "version": 1})"));
  EXPECT_EQ(CodeOf(Datastore::Open(*env, dir.path())), StatusCode::kNotFound);
}

TEST_F(DatastoreTest, ListSnapshotsIgnoresUnfinishedAndForeignEntries) {
  Commit(SnapshotRef{vm100_, kT0 + 60});
  Commit(SnapshotRef{vm100_, kT0});
  std::string group = store_->GroupDir(vm100_);
  // A snapshot directory without a manifest (killed backup).
  CAIRN_ASSERT_OK(env_->CreateDir(JoinPath(group, FormatRfc3339(kT0 + 120))));
  // Names that are not times.
  CAIRN_ASSERT_OK(env_->CreateDir(JoinPath(group, "notes")));
  CAIRN_ASSERT_OK(env_->CreateDir(JoinPath(group, "2026-02-31T00:00:00Z")));
  test_util::WriteFileOrFail(JoinPath(group, "2026-11-30T06:00:00Z.tmp"), AsBytes("x"));

  auto snaps = store_->ListSnapshots(vm100_);
  CAIRN_ASSERT_OK(snaps);
  ASSERT_EQ(snaps->size(), 2u);
  EXPECT_EQ((*snaps)[0].time, kT0);  // oldest first
  EXPECT_EQ((*snaps)[1].time, kT0 + 60);

  auto none = store_->ListSnapshots(GroupRef{"", "ct", "1"});
  CAIRN_ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(DatastoreTest, ResolveLatestAndExact) {
  GroupRef other{"", "ct", "7"};
  EXPECT_EQ(CodeOf(store_->Resolve(SnapshotSpec{vm100_, true, 0})), StatusCode::kNotFound);
  Commit(SnapshotRef{vm100_, kT0});
  Commit(SnapshotRef{vm100_, kT0 + 3600});
  Commit(SnapshotRef{other, kT0 + 7200});
  // An unfinished newer one does not count as latest.
  CAIRN_ASSERT_OK(env_->CreateDir(store_->SnapshotDir(SnapshotRef{vm100_, kT0 + 9999})));

  auto latest = store_->Resolve(SnapshotSpec{vm100_, true, 0});
  CAIRN_ASSERT_OK(latest);
  EXPECT_EQ(latest->time, kT0 + 3600);
  EXPECT_EQ(latest->group, vm100_);

  auto exact = store_->Resolve(SnapshotSpec{vm100_, false, kT0});
  CAIRN_ASSERT_OK(exact);
  EXPECT_EQ(exact->time, kT0);

  auto missing = store_->Resolve(SnapshotSpec{vm100_, false, kT0 + 1});
  EXPECT_EQ(CodeOf(missing), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("vm/100/2026-11-30T05:00:01Z"),
            std::string_view::npos)
      << missing.status().ToString();
  EXPECT_EQ(CodeOf(store_->Resolve(SnapshotSpec{vm100_, false, kT0 + 9999})),
            StatusCode::kNotFound);
}

TEST_F(DatastoreTest, ListsGroupsNamespacesAndAllSnapshots) {
  GroupRef ct{"", "ct", "7"};
  GroupRef nested{"a/b", "host", "h1"};
  GroupRef in_a{"a", "vm", "100"};
  Commit(SnapshotRef{vm100_, kT0});
  Commit(SnapshotRef{ct, kT0});
  Commit(SnapshotRef{nested, kT0});
  Commit(SnapshotRef{in_a, kT0});

  auto groups = store_->ListGroups("");
  CAIRN_ASSERT_OK(groups);
  EXPECT_EQ(*groups, (std::vector<GroupRef>{ct, vm100_}));
  auto ns = store_->ListNamespaces("");
  CAIRN_ASSERT_OK(ns);
  EXPECT_EQ(*ns, (std::vector<std::string>{"a"}));
  auto ns_a = store_->ListNamespaces("a");
  CAIRN_ASSERT_OK(ns_a);
  EXPECT_EQ(*ns_a, (std::vector<std::string>{"a/b"}));

  auto all = store_->ListAllSnapshots();
  CAIRN_ASSERT_OK(all);
  EXPECT_EQ(all->size(), 4u);
  for (const auto& g : {vm100_, ct, nested, in_a}) {
    EXPECT_NE(std::find(all->begin(), all->end(), SnapshotRef{g, kT0}), all->end())
        << g.RelDir();
  }
}

TEST_F(DatastoreTest, ReadManifestChecksItsName) {
  SnapshotRef a{vm100_, kT0};
  SnapshotRef b{vm100_, kT0 + 1};
  Commit(a);
  Commit(b);
  auto m = store_->ReadManifest(a);
  CAIRN_ASSERT_OK(m);
  EXPECT_EQ(m->time, a.TimeString());
  ASSERT_EQ(m->archives.size(), 1u);
  EXPECT_EQ(m->archives[0].name, "vm.conf.blob");

  // b's manifest copied into a's directory claims to be b: DataLoss.
  Bytes b_manifest =
      test_util::ReadFileOrFail(JoinPath(store_->SnapshotDir(b), index::kManifestFileName));
  test_util::WriteFileOrFail(JoinPath(store_->SnapshotDir(a), index::kManifestFileName),
                             b_manifest);
  auto wrong = store_->ReadManifest(a);
  EXPECT_EQ(CodeOf(wrong), StatusCode::kDataLoss);
  EXPECT_NE(wrong.status().message().find(a.ToString()), std::string_view::npos);

  // A corrupt manifest is DataLoss naming the file.
  b_manifest[b_manifest.size() - 3] ^= 1;
  test_util::WriteFileOrFail(JoinPath(store_->SnapshotDir(b), index::kManifestFileName),
                             b_manifest);
  auto corrupt = store_->ReadManifest(b);
  EXPECT_EQ(CodeOf(corrupt), StatusCode::kDataLoss);
  EXPECT_NE(corrupt.status().message().find(index::kManifestFileName), std::string_view::npos);
}

TEST_F(DatastoreTest, ReadBlobArchiveChecksItsContent) {
  SnapshotRef snap{vm100_, kT0};
  Commit(snap, "the config file");
  auto m = store_->ReadManifest(snap);
  CAIRN_ASSERT_OK(m);
  const index::ArchiveEntry& entry = m->archives[0];
  auto data = store_->ReadBlobArchive(snap, entry);
  CAIRN_ASSERT_OK(data);
  EXPECT_EQ(AsStringView(*data), "the config file");

  std::string file = JoinPath(store_->SnapshotDir(snap), entry.FileName());
  Bytes stored = test_util::ReadFileOrFail(file);
  stored.back() ^= 0x20;
  test_util::WriteFileOrFail(file, stored);
  auto bad = store_->ReadBlobArchive(snap, entry);
  EXPECT_EQ(CodeOf(bad), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find(file), std::string_view::npos);
}

TEST_F(DatastoreTest, ReadImageIndexChecksAgainstManifest) {
  SnapshotRef snap{vm100_, kT0};
  std::vector<crypto::Digest> digests(2, crypto::Sha256(AsBytes("c")));
  index::FixedIndex idx(2 * index::kMinChunkSize, index::kMinChunkSize, digests);
  {
    auto w = SnapshotWriter::Begin(*store_, snap);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddImage("disk0.img", idx));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }
  auto m = store_->ReadManifest(snap);
  CAIRN_ASSERT_OK(m);
  const index::ArchiveEntry* entry = m->Find("disk0.img");
  ASSERT_NE(entry, nullptr);
  auto back = store_->ReadImageIndex(snap, *entry);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->digests(), digests);

  index::ArchiveEntry wrong_size = *entry;
  wrong_size.size += 1;
  EXPECT_EQ(CodeOf(store_->ReadImageIndex(snap, wrong_size)), StatusCode::kDataLoss);
  index::ArchiveEntry wrong_csum = *entry;
  wrong_csum.csum[0] ^= 1;
  auto r = store_->ReadImageIndex(snap, wrong_csum);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find(snap.ToString()), std::string_view::npos);
  index::ArchiveEntry wrong_chunk = *entry;
  wrong_chunk.chunk_size *= 2;
  EXPECT_EQ(CodeOf(store_->ReadImageIndex(snap, wrong_chunk)), StatusCode::kDataLoss);
}

TEST_F(DatastoreTest, VerifyStateRoundTripsWithoutTouchingManifest) {
  SnapshotRef snap{vm100_, kT0};
  Commit(snap);
  std::string manifest_path = JoinPath(store_->SnapshotDir(snap), index::kManifestFileName);
  Bytes manifest_before = test_util::ReadFileOrFail(manifest_path);

  EXPECT_FALSE(store_->ReadVerifyState(snap).has_value());
  CAIRN_ASSERT_OK(store_->WriteVerifyState(snap, VerifyState{VerifyOutcome::kOk, kT0 + 5, 0}));
  auto ok = store_->ReadVerifyState(snap);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->outcome, VerifyOutcome::kOk);
  EXPECT_EQ(ok->time, kT0 + 5);
  EXPECT_EQ(ok->errors, 0u);

  CAIRN_ASSERT_OK(
      store_->WriteVerifyState(snap, VerifyState{VerifyOutcome::kFailed, kT0 + 9, 3}));
  auto failed = store_->ReadVerifyState(snap);
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->outcome, VerifyOutcome::kFailed);
  EXPECT_EQ(failed->time, kT0 + 9);
  EXPECT_EQ(failed->errors, 3u);

  EXPECT_EQ(test_util::ReadFileOrFail(manifest_path), manifest_before);
  CAIRN_EXPECT_OK(store_->ReadManifest(snap));

  // An unreadable state reads as "never verified".
  std::string state_path = JoinPath(store_->SnapshotDir(snap), kVerifyStateFileName);
  test_util::WriteFileOrFail(state_path, AsBytes("garbage"));
  EXPECT_FALSE(store_->ReadVerifyState(snap).has_value());
  for (std::string_view json : {R"({"version": 1, "state": "maybe", "time": 1, "errors": 0})",
                                R"({"version": 2, "state": "ok", "time": 1, "errors": 0})",
                                R"({"version": 1, "state": "ok", "time": "x", "errors": 0})",
                                R"({"version": 1, "state": "ok"})", "[1, 2]"}) {
    auto stored = blob::Encode(AsBytes(json));
    CAIRN_ASSERT_OK(stored);
    test_util::WriteFileOrFail(state_path, *stored);
    EXPECT_FALSE(store_->ReadVerifyState(snap).has_value()) << json;
  }
}

TEST_F(DatastoreTest, LockGroupIsExclusive) {
  auto first = store_->LockGroup(vm100_);
  CAIRN_ASSERT_OK(first);
  auto second = store_->LockGroup(vm100_);
  EXPECT_EQ(CodeOf(second), StatusCode::kAborted);
  EXPECT_NE(second.status().message().find("vm/100"), std::string_view::npos);
  CAIRN_EXPECT_OK(store_->LockGroup(GroupRef{"", "vm", "101"}));  // other groups are free
  first->reset();
  CAIRN_EXPECT_OK(store_->LockGroup(vm100_));
}

}  // namespace
}  // namespace cairn::datastore
