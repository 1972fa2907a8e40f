#include "mount/snapshot_fs.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "backup/backup.h"
#include "tests/unit_test_util.h"

namespace cairn::mount {
namespace {

using test_util::CodeOf;
using test_util::RandomBytes;

constexpr uint32_t kChunk = 64u << 10;
constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z

// A datastore with an image + blob snapshot (vm/100) and a tree snapshot
// (host/web), made by the real backup, and the file system over it.
class SnapshotFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.Join("store")));
    auto store = datastore::Datastore::Open(*env_, dir_.Join("store"));
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    image_ = RandomBytes(5 * kChunk + 123, 1);
    std::fill(image_.begin() + kChunk, image_.begin() + 2 * kChunk, 0);
    test_util::WriteFileOrFail(dir_.Join("disk.raw"), image_);
    test_util::WriteFileOrFail(dir_.Join("vm.conf"), AsBytes("cores: 2\n"));
    tree_ = dir_.Join("tree");
    std::filesystem::create_directories(tree_ + "/etc");
    test_util::WriteFileOrFail(tree_ + "/etc/hosts", AsBytes("127.0.0.1 localhost\n"));
    test_util::WriteFileOrFail(tree_ + "/big", RandomBytes(300000, 2));
    ASSERT_EQ(::link((tree_ + "/etc/hosts").c_str(), (tree_ + "/hard").c_str()), 0);
    ASSERT_EQ(::symlink("etc/hosts", (tree_ + "/link").c_str()), 0);
    ::chmod((tree_ + "/big").c_str(), 0640);
    xattrs_ = ::setxattr((tree_ + "/big").c_str(), "user.note", "hi", 2, 0) == 0;
    Backup({"vm", "100"}, kT0, {{"disk0.img", dir_.Join("disk.raw")}, {"vm.conf.blob", dir_.Join("vm.conf")}});
    Backup({"host", "web"}, kT0, {{"root.tree", tree_}});
  }

  void Backup(std::pair<std::string, std::string> group, int64_t t,
              std::vector<backup::ArchiveSpec> archives) {
    backup::BackupOptions o;
    o.group = datastore::GroupRef{"", group.first, group.second};
    o.time = t;
    o.archives = std::move(archives);
    o.image.chunk_size = kChunk;
    o.logger = logger_.get();
    o.tree.logger = logger_.get();
    CAIRN_ASSERT_OK(backup::RunBackup(*store_, o));
  }

  std::unique_ptr<SnapshotFs> Open(const std::string& scope = "", uint64_t max_tree_bytes = 64u << 20) {
    SnapshotFsOptions o;
    o.readers = {&cache_, &store_->source(), access::ReadaheadFor(16u << 20, 0)};
    o.refresh_ns = 0;  // every listing read afresh
    o.max_tree_bytes = max_tree_bytes;
    o.logger = logger_.get();
    auto fs = SnapshotFs::Open(*store_, "", scope, o);
    EXPECT_TRUE(fs.ok()) << fs.status().ToString();
    return fs.ok() ? std::move(*fs) : nullptr;
  }

  // Looks a path up from the root, component by component.
  Result<Attr> Walk(SnapshotFs& fs, const std::string& path) {
    Attr a;
    a.ino = SnapshotFs::kRootIno;
    for (const auto& part : std::filesystem::path(path)) {
      CAIRN_ASSIGN_OR_RETURN(a, fs.Lookup(a.ino, part.string()));
    }
    return a;
  }

  Bytes ReadAll(SnapshotFs& fs, uint64_t ino) {
    auto f = fs.OpenFile(ino);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return {};
    Bytes out;
    Bytes buf(7000);  // an odd size: reads cross chunks
    for (uint64_t off = 0;; off += buf.size()) {
      auto n = (*f)->Read(off, buf);
      EXPECT_TRUE(n.ok());
      if (!n.ok() || *n == 0) break;
      out.insert(out.end(), buf.begin(), buf.begin() + static_cast<ptrdiff_t>(*n));
    }
    return out;
  }

  static std::vector<std::string> Names(const std::vector<DirEntry>& entries) {
    std::vector<std::string> n;
    for (const auto& e : entries) n.push_back(e.name);
    return n;
  }

  test_util::TempDir dir_;
  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  std::unique_ptr<datastore::Datastore> store_;
  access::ChunkCache cache_{{.capacity_bytes = 16u << 20}};
  Bytes image_;
  std::string tree_;
  bool xattrs_ = false;
  const std::string time_ = datastore::FormatRfc3339(kT0);
};

TEST_F(SnapshotFsTest, NamespacesGroupsSnapshotsAndLatest) {
  auto fs = Open();
  auto root = fs->ReadDir(SnapshotFs::kRootIno);
  CAIRN_ASSERT_OK(root);
  EXPECT_EQ(Names(*root), (std::vector<std::string>{"host", "vm"}));
  auto group = Walk(*fs, "vm/100");
  CAIRN_ASSERT_OK(group);
  EXPECT_TRUE(S_ISDIR(group->mode));
  EXPECT_FALSE(group->stable);
  EXPECT_EQ(Names(*fs->ReadDir(group->ino)), (std::vector<std::string>{time_, "latest"}));
  auto latest = Walk(*fs, "vm/100/latest");
  CAIRN_ASSERT_OK(latest);
  EXPECT_TRUE(S_ISLNK(latest->mode));
  EXPECT_EQ(*fs->ReadLink(latest->ino), time_);
  auto snap = Walk(*fs, "vm/100/" + time_);
  CAIRN_ASSERT_OK(snap);
  EXPECT_TRUE(snap->stable);
  EXPECT_EQ(snap->mtime_ns, kT0 * 1'000'000'000);
  EXPECT_EQ(Names(*fs->ReadDir(snap->ino)), (std::vector<std::string>{"disk0.img", "vm.conf.blob"}));
}

TEST_F(SnapshotFsTest, AnImageAndABlobAreFiles) {
  auto fs = Open();
  auto img = Walk(*fs, "vm/100/" + time_ + "/disk0.img");
  CAIRN_ASSERT_OK(img);
  EXPECT_EQ(img->mode, S_IFREG | 0444u);
  EXPECT_EQ(img->size, image_.size());
  EXPECT_EQ(ReadAll(*fs, img->ino), image_);
  auto blob = Walk(*fs, "vm/100/" + time_ + "/vm.conf.blob");
  CAIRN_ASSERT_OK(blob);
  EXPECT_EQ(ReadAll(*fs, blob->ino), Bytes(AsBytes("cores: 2\n").begin(), AsBytes("cores: 2\n").end()));
}

// The image's chunk 1 is zeros: a hole for stat (st_blocks) and for lseek's
// SEEK_DATA/SEEK_HOLE, so `cp` and `du` see it; a blob is all data. An
// image is read in 1 MiB requests past the page cache; a blob is not.
TEST_F(SnapshotFsTest, AnImagesZeroChunksAreItsHoles) {
  auto fs = Open();
  auto img = Walk(*fs, "vm/100/" + time_ + "/disk0.img");
  CAIRN_ASSERT_OK(img);
  ASSERT_TRUE(img->allocated.has_value());
  EXPECT_EQ(*img->allocated, image_.size() - kChunk);
  auto f = fs->OpenFile(img->ino);
  CAIRN_ASSERT_OK(f);
  const SnapshotFs::File& file = **f;
  EXPECT_TRUE(file.direct_io());  // an image bypasses the page cache
  EXPECT_EQ(img->blksize, 1u << 20);
  EXPECT_EQ(*file.Seek(0, /*data=*/true), 0u);
  EXPECT_EQ(*file.Seek(0, /*data=*/false), kChunk);
  EXPECT_EQ(*file.Seek(kChunk + 5, /*data=*/false), kChunk + 5);  // inside the hole
  EXPECT_EQ(*file.Seek(kChunk + 5, /*data=*/true), 2 * kChunk);
  EXPECT_EQ(*file.Seek(3 * kChunk, /*data=*/false), image_.size());  // the hole at the end
  EXPECT_EQ(CodeOf(file.Seek(image_.size(), true)), StatusCode::kOutOfRange);
  EXPECT_EQ(CodeOf(file.Seek(image_.size(), false)), StatusCode::kOutOfRange);

  auto blob = Walk(*fs, "vm/100/" + time_ + "/vm.conf.blob");
  CAIRN_ASSERT_OK(blob);
  EXPECT_FALSE(blob->allocated.has_value());
  EXPECT_EQ(blob->blksize, 4096u);
  auto b = fs->OpenFile(blob->ino);
  CAIRN_ASSERT_OK(b);
  EXPECT_FALSE((*b)->direct_io());
  EXPECT_EQ(*(*b)->Seek(2, true), 2u);
  EXPECT_EQ(*(*b)->Seek(2, false), (*b)->size());
}

TEST_F(SnapshotFsTest, ATreeHasItsEntriesMetadataHardlinksSymlinksAndXattrs) {
  auto fs = Open();
  const std::string root = "host/web/" + time_ + "/root.tree";
  auto dir = Walk(*fs, root);
  CAIRN_ASSERT_OK(dir);
  EXPECT_TRUE(S_ISDIR(dir->mode));
  EXPECT_EQ(Names(*fs->ReadDir(dir->ino)), (std::vector<std::string>{"big", "etc", "hard", "link"}));
  auto big = Walk(*fs, root + "/big");
  CAIRN_ASSERT_OK(big);
  EXPECT_EQ(big->mode, S_IFREG | 0640u);
  struct stat st;
  ASSERT_EQ(::stat((tree_ + "/big").c_str(), &st), 0);
  EXPECT_EQ(big->mtime_ns, st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec);
  EXPECT_EQ(ReadAll(*fs, big->ino), test_util::ReadFileOrFail(tree_ + "/big"));
  auto hosts = Walk(*fs, root + "/etc/hosts");
  auto hard = Walk(*fs, root + "/hard");
  CAIRN_ASSERT_OK(hosts);
  CAIRN_ASSERT_OK(hard);
  EXPECT_EQ(hosts->ino, hard->ino);
  EXPECT_EQ(hard->nlink, 2u);
  auto link = Walk(*fs, root + "/link");
  CAIRN_ASSERT_OK(link);
  EXPECT_EQ(*fs->ReadLink(link->ino), "etc/hosts");
  if (xattrs_) {
    EXPECT_EQ(*fs->ListXattr(big->ino), std::vector<std::string>{"user.note"});
    EXPECT_EQ(*fs->GetXattr(big->ino, "user.note"), "hi");
    EXPECT_EQ(CodeOf(fs->GetXattr(big->ino, "user.other")), StatusCode::kNotFound);
  }
}

TEST_F(SnapshotFsTest, ErrorsSayWhatKindOfEntryItIs) {
  auto fs = Open();
  EXPECT_EQ(CodeOf(Walk(*fs, "vm/999")), StatusCode::kNotFound);
  auto img = Walk(*fs, "vm/100/" + time_ + "/disk0.img");
  CAIRN_ASSERT_OK(img);
  EXPECT_EQ(CodeOf(fs->Lookup(img->ino, "x")), StatusCode::kInvalidArgument);  // ENOTDIR
  EXPECT_EQ(CodeOf(fs->ReadLink(img->ino)), StatusCode::kInvalidArgument);
  auto etc = Walk(*fs, "host/web/" + time_ + "/root.tree/etc");
  CAIRN_ASSERT_OK(etc);
  EXPECT_EQ(CodeOf(fs->OpenFile(etc->ino)), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(fs->GetAttr(999999)), StatusCode::kNotFound);
}

TEST_F(SnapshotFsTest, ANewSnapshotAppearsWhenTheListingIsReadAgain) {
  auto fs = Open("vm/100");
  EXPECT_EQ(Names(*fs->ReadDir(SnapshotFs::kRootIno)), (std::vector<std::string>{time_, "latest"}));
  Backup({"vm", "100"}, kT0 + 60, {{"disk0.img", dir_.Join("disk.raw")}});
  const std::string later = datastore::FormatRfc3339(kT0 + 60);
  EXPECT_EQ(Names(*fs->ReadDir(SnapshotFs::kRootIno)), (std::vector<std::string>{time_, later, "latest"}));
  EXPECT_EQ(*fs->ReadLink(Walk(*fs, "latest")->ino), later);
}

TEST_F(SnapshotFsTest, TreeInodesStayTheSameWhenAViewIsDroppedAndLoadedAgain) {
  Backup({"host", "db"}, kT0, {{"root.tree", tree_}});
  auto fs = Open("", /*max_tree_bytes=*/1);  // one view at a time
  const std::string web = "host/web/" + time_ + "/root.tree/etc/hosts";
  const std::string db = "host/db/" + time_ + "/root.tree/etc/hosts";
  auto first = Walk(*fs, web);
  CAIRN_ASSERT_OK(first);
  CAIRN_ASSERT_OK(Walk(*fs, db));  // drops web's view
  auto again = fs->GetAttr(first->ino);  // loads it again
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->ino, first->ino);
  EXPECT_EQ(again->size, first->size);
  EXPECT_GE(fs->stats().trees_loaded, 3u);
}

TEST_F(SnapshotFsTest, AnOpenFilePinsItsSnapshot) {
  auto fs = Open();
  auto img = Walk(*fs, "vm/100/" + time_ + "/disk0.img");
  CAIRN_ASSERT_OK(img);
  datastore::SnapshotRef snap{{"", "vm", "100"}, kT0};
  {
    auto f = fs->OpenFile(img->ino);
    CAIRN_ASSERT_OK(f);
    EXPECT_EQ(CodeOf(store_->LockSnapshotExclusive(snap)), StatusCode::kAborted);
    EXPECT_EQ(fs->stats().open_files, 1u);
  }
  CAIRN_EXPECT_OK(store_->LockSnapshotExclusive(snap));
}

TEST_F(SnapshotFsTest, ConcurrentLookupsAndReadsAgree) {
  auto fs = Open();
  const Bytes big = test_util::ReadFileOrFail(tree_ + "/big");
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < 5; ++round) {
        auto a = Walk(*fs, "host/web/" + time_ + "/root.tree/big");
        auto i = Walk(*fs, "vm/100/" + time_ + "/disk0.img");
        if (!a.ok() || !i.ok() || ReadAll(*fs, a->ino) != big || ReadAll(*fs, i->ino) != image_) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace cairn::mount
