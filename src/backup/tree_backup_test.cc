#include "backup/tree_backup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "backup/backup.h"
#include "base/fault_injection_env.h"
#include "blob/blob.h"
#include "tests/unit_test_util.h"
#include "tree/tree_format.h"

namespace cairn::backup {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z

Bytes B(std::string_view text) {
  ByteSpan b = AsBytes(text);
  return Bytes(b.begin(), b.end());
}

// Reads a tree archive back without the restore code: every entry, and
// every regular file's content from the payload stream.
struct ReadBack {
  std::map<std::string, tree::Entry> entries;
  std::map<std::string, Bytes> content;
  index::DynamicIndex data;
};

Result<ReadBack> ReadTree(const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                          const std::string& name) {
  CAIRN_ASSIGN_OR_RETURN(index::Manifest m, store.ReadManifest(snap));
  const index::ArchiveEntry* entry = m.Find(name);
  if (entry == nullptr) return NotFoundError(name);
  CAIRN_ASSIGN_OR_RETURN(auto idx, store.ReadTreeIndexes(snap, *entry));
  auto stream = [&](const index::DynamicIndex& di) -> Result<Bytes> {
    Bytes out;
    for (size_t i = 0; i < di.chunk_count(); ++i) {
      CAIRN_ASSIGN_OR_RETURN(Bytes stored, store.chunks().Read(di.digest(i)));
      CAIRN_ASSIGN_OR_RETURN(Bytes plain, blob::DecodeChunk(stored, di.digest(i)));
      if (plain.size() != di.ChunkLength(i)) return DataLossError("chunk length");
      out.insert(out.end(), plain.begin(), plain.end());
    }
    return out;
  };
  CAIRN_ASSIGN_OR_RETURN(Bytes meta, stream(idx.meta));
  CAIRN_ASSIGN_OR_RETURN(Bytes payload, stream(idx.data));
  CAIRN_ASSIGN_OR_RETURN(auto entries, tree::DecodeTree(meta, payload.size()));
  ReadBack rb;
  rb.data = idx.data;
  for (auto& e : entries) {
    if (e.kind == tree::EntryKind::kFile) {
      rb.content[e.path] = Bytes(payload.begin() + static_cast<std::ptrdiff_t>(e.payload_offset),
                                 payload.begin() + static_cast<std::ptrdiff_t>(e.payload_offset + e.size));
    }
    std::string path = e.path;
    rb.entries.emplace(path, std::move(e));
  }
  return rb;
}

class TreeBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_path_ = dir_.Join("store");
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, store_path_));
    auto store = datastore::Datastore::Open(*env_, store_path_);
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    src_ = dir_.Join("src");
    fs::create_directories(src_ + "/etc/conf.d");
    fs::create_directories(src_ + "/var/lib");
    Write("etc/hosts", AsBytes("127.0.0.1 localhost\n"));
    Write("etc/conf.d/a.conf", AsBytes("a = 1\n"));
    Write("etc/empty", Bytes());
    Write("var/lib/big", test_util::RandomBytes(5u << 20, 7));
    Write("var/lib/zeros", Bytes(3u << 20, 0));
    Write("var/lib/cache.tmp", AsBytes("scratch"));
    fs::create_symlink("../etc/hosts", src_ + "/var/hosts-link");
    fs::create_hard_link(src_ + "/etc/hosts", src_ + "/var/hosts-hard");
    ASSERT_EQ(::mkfifo((src_ + "/var/fifo").c_str(), 0640), 0);
  }

  void Write(const std::string& rel, ByteSpan data) {
    test_util::WriteFileOrFail(src_ + "/" + rel, data);
  }

  Result<BackupReport> Backup(int64_t time, std::vector<std::string> excludes = {},
                              Env* source_env = nullptr) {
    BackupOptions o;
    o.group = group_;
    o.time = time;
    o.archives.push_back(ArchiveSpec{"root.tree", src_});
    o.tree.excludes = std::move(excludes);
    o.tree.env = source_env;
    o.image.workers = 2;
    o.created_by = "unit-test";
    o.logger = logger_.get();
    return RunBackup(*store_, o);
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::string store_path_;
  std::string src_;
  std::unique_ptr<datastore::Datastore> store_;
  datastore::GroupRef group_{"", "host", "web"};
};

TEST_F(TreeBackupTest, RecordsEveryKindWithContent) {
  auto report = Backup(kT0);
  CAIRN_ASSERT_OK(report);
  const TreeStats& t = report->archives.at(0).tree;
  EXPECT_EQ(t.files, 6u);  // the hard link's second name is not a file of its own
  EXPECT_EQ(t.reused_files, 0u);
  auto rb = ReadTree(*store_, report->snapshot, "root.tree");
  CAIRN_ASSERT_OK(rb);
  EXPECT_EQ(rb->entries.at("").kind, tree::EntryKind::kDirectory);
  EXPECT_EQ(rb->content.at("etc/hosts"), B("127.0.0.1 localhost\n"));
  EXPECT_EQ(rb->content.at("var/lib/big"), test_util::RandomBytes(5u << 20, 7));
  EXPECT_EQ(rb->content.at("var/lib/zeros"), Bytes(3u << 20, 0));
  EXPECT_EQ(rb->content.at("etc/empty"), Bytes());
  EXPECT_EQ(rb->entries.at("var/hosts-link").kind, tree::EntryKind::kSymlink);
  EXPECT_EQ(rb->entries.at("var/hosts-link").link_target, "../etc/hosts");
  EXPECT_EQ(rb->entries.at("var/fifo").kind, tree::EntryKind::kFifo);
  // etc/hosts comes first in the walk, so it is the file and var/ has the link.
  EXPECT_TRUE(rb->entries.at("etc/hosts").linked);
  EXPECT_EQ(rb->entries.at("var/hosts-hard").kind, tree::EntryKind::kHardlink);
  EXPECT_EQ(rb->entries.at("var/hosts-hard").link_target, "etc/hosts");
  struct stat st {};
  ASSERT_EQ(::stat((src_ + "/var/lib/big").c_str(), &st), 0);
  EXPECT_EQ(rb->entries.at("var/lib/big").mtime_ns,
            int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec);
  EXPECT_EQ(rb->entries.at("var/lib/big").mode, st.st_mode & 07777);
}

TEST_F(TreeBackupTest, ExcludesByNameAndPath) {
  auto report = Backup(kT0, {"*.tmp", "/etc/conf.d"});
  CAIRN_ASSERT_OK(report);
  auto rb = ReadTree(*store_, report->snapshot, "root.tree");
  CAIRN_ASSERT_OK(rb);
  EXPECT_FALSE(rb->entries.contains("var/lib/cache.tmp"));
  EXPECT_FALSE(rb->entries.contains("etc/conf.d"));
  EXPECT_FALSE(rb->entries.contains("etc/conf.d/a.conf"));
  EXPECT_TRUE(rb->entries.contains("etc/hosts"));
}

TEST_F(TreeBackupTest, UnchangedFilesAreNotReadAgain) {
  auto first = Backup(kT0);
  CAIRN_ASSERT_OK(first);
  Write("etc/conf.d/a.conf", AsBytes("a = 2\n"));  // changed
  Write("var/new", AsBytes("new file"));
  auto second = Backup(kT0 + 60);
  CAIRN_ASSERT_OK(second);
  const TreeStats& t = second->archives.at(0).tree;
  EXPECT_EQ(t.files, 7u);
  EXPECT_EQ(t.reused_files, 4u);  // hosts, big, zeros, cache.tmp
  EXPECT_EQ(t.read_bytes, 6u + 8u);
  EXPECT_EQ(t.new_chunks > 0, true);
  auto rb = ReadTree(*store_, second->snapshot, "root.tree");
  CAIRN_ASSERT_OK(rb);
  EXPECT_EQ(rb->content.at("etc/conf.d/a.conf"), B("a = 2\n"));
  EXPECT_EQ(rb->content.at("var/new"), B("new file"));
  EXPECT_EQ(rb->content.at("var/lib/big"), test_util::RandomBytes(5u << 20, 7));
  EXPECT_EQ(rb->content.at("etc/hosts"), B("127.0.0.1 localhost\n"));
  EXPECT_EQ(rb->content.at("var/lib/cache.tmp"), B("scratch"));

  // A third, unchanged backup reads nothing and stores no payload chunk.
  auto third = Backup(kT0 + 120);
  CAIRN_ASSERT_OK(third);
  EXPECT_EQ(third->archives.at(0).tree.read_bytes, 0u);
  EXPECT_EQ(third->archives.at(0).tree.reused_files, 6u);
  auto rb3 = ReadTree(*store_, third->snapshot, "root.tree");
  CAIRN_ASSERT_OK(rb3);
  EXPECT_EQ(rb3->content, rb->content);
}

TEST_F(TreeBackupTest, ATouchedFileIsReadAgain) {
  CAIRN_ASSERT_OK(Backup(kT0));
  // Same size, same content, new mtime: read again (content-identical chunks dedup).
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (src_ + "/var/lib/big").c_str(), times, 0), 0);
  auto second = Backup(kT0 + 60);
  CAIRN_ASSERT_OK(second);
  EXPECT_EQ(second->archives.at(0).tree.read_bytes, 5u << 20);
  auto rb = ReadTree(*store_, second->snapshot, "root.tree");
  CAIRN_ASSERT_OK(rb);
  EXPECT_EQ(rb->entries.at("var/lib/big").mtime_ns, int64_t{12345} * 1'000'000'000 + 678);
}

TEST_F(TreeBackupTest, InsertionNearTheStartKeepsLaterChunks) {
  fs::remove_all(src_);
  fs::create_directories(src_);
  Bytes big = test_util::RandomBytes(24u << 20, 11);
  Write("big", big);
  auto first = Backup(kT0);
  CAIRN_ASSERT_OK(first);
  big.insert(big.begin() + 1000, 100, 0x5a);
  Write("big", big);
  auto second = Backup(kT0 + 60);
  CAIRN_ASSERT_OK(second);
  const TreeStats& t = second->archives.at(0).tree;
  // Only the chunk around the insertion (and the metadata) is new.
  EXPECT_LE(t.new_bytes, (8u << 20) + (1u << 20));
  EXPECT_LT(t.new_chunks, t.chunks);
}

TEST_F(TreeBackupTest, MissingOrNonDirectorySourceFails) {
  fs::remove_all(src_);
  auto report = Backup(kT0);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find(src_), std::string::npos) << report.status().ToString();
  test_util::WriteFileOrFail(src_, Bytes());  // src_ is now a regular file
  report = Backup(kT0);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("not a directory"), std::string::npos)
      << report.status().ToString();
  EXPECT_TRUE(store_->ListSnapshots(group_)->empty());
}

// The walk and the reads go through the Env: a read failing with EIO
// (injected) fails the backup, naming the file, and commits nothing. (An
// unreadable file, EACCES at open, is skipped with a warning instead: that
// is a permission, not a failing disk.)
TEST_F(TreeBackupTest, ReadErrorFromTheEnvFailsNamingTheFile) {
  FaultInjectionEnv faulty(env_.get());
  faulty.FailReadsMatching("lib/big");
  auto report = Backup(kT0, {}, &faulty);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), StatusCode::kDataLoss) << report.status().ToString();
  EXPECT_NE(report.status().message().find("/var/lib/big"), std::string::npos)
      << report.status().ToString();
  EXPECT_NE(report.status().message().find("Input/output error"), std::string::npos)
      << report.status().ToString();
  EXPECT_TRUE(store_->ListSnapshots(group_)->empty());

  faulty.FailReadsMatching("");  // the same Env, healthy again: a full backup
  auto ok = Backup(kT0, {}, &faulty);
  CAIRN_ASSERT_OK(ok);
  EXPECT_EQ(ok->archives[0].tree.read_bytes, (8u << 20) + 20 + 6 + 7);
}

}  // namespace
}  // namespace cairn::backup
