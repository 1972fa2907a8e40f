#include "restore/tree_restore.h"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/fault_injection_env.h"
#include "blob/blob.h"
#include "chunkio/tree_reader.h"
#include "datastore/snapshot_writer.h"
#include "restore/restore.h"
#include "tests/unit_test_util.h"
#include "tree/tree_format.h"

namespace cairn::restore {
namespace {

using test_util::CodeOf;
using tree::Entry;
using tree::EntryKind;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kPiece = 64u << 10;  // tests cut both streams into fixed pieces
constexpr int64_t kMtime = 1700000000'123456789;

// Counts reads per chunk id, and can corrupt the bytes of one id.
class CountingSource final : public store::ChunkSource {
 public:
  explicit CountingSource(store::ChunkSource& base) : base_(base) {}

  Result<Bytes> Read(const store::ChunkId& id) override {
    {
      std::lock_guard lock(mu_);
      ++reads_[id];
      max_in_flight_ = std::max(max_in_flight_, ++in_flight_);
    }
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
    auto r = base_.Read(id);
    {
      std::lock_guard lock(mu_);
      --in_flight_;
    }
    if (r.ok() && corrupt_ && id == *corrupt_ && !r->empty()) r->back() ^= 0x40;
    return r;
  }
  store::SourceTraits Traits() const override { return base_.Traits(); }

  int ReadsOf(const crypto::Digest& id) const {
    std::lock_guard lock(mu_);
    auto it = reads_.find(id);
    return it == reads_.end() ? 0 : it->second;
  }
  int TotalReads() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [id, count] : reads_) n += count;
    return n;
  }
  void Corrupt(const crypto::Digest& id) { corrupt_ = id; }
  // Each read takes `ms` (as a network round trip would), so reads overlap
  // when several are in flight.
  void SetDelay(int ms) { delay_ms_ = ms; }
  int MaxInFlight() const {
    std::lock_guard lock(mu_);
    return max_in_flight_;
  }

 private:
  store::ChunkSource& base_;
  int delay_ms_ = 0;
  int in_flight_ = 0;
  int max_in_flight_ = 0;
  mutable std::mutex mu_;
  std::map<crypto::Digest, int> reads_;
  std::optional<crypto::Digest> corrupt_;
};

Bytes B(std::string_view s) {
  ByteSpan b = AsBytes(s);
  return Bytes(b.begin(), b.end());
}

Entry Make(EntryKind kind, const std::string& path, uint32_t mode) {
  Entry e;
  e.kind = kind;
  e.path = path;
  e.name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
  e.mode = mode;
  e.uid = ::getuid();
  e.gid = ::getgid();
  e.mtime_ns = kMtime;
  return e;
}

// A tree under construction: entries in pre-order, file contents beside.
struct TreeSpec {
  std::vector<Entry> entries;
  std::vector<Bytes> contents;  // per entry; used for kFile

  TreeSpec() { Dir("", 0755); }
  TreeSpec& Dir(const std::string& path, uint32_t mode = 0755, int64_t mtime = kMtime) {
    Entry e = Make(EntryKind::kDirectory, path, mode);
    e.mtime_ns = mtime;
    return Add(std::move(e));
  }
  TreeSpec& File(const std::string& path, Bytes content, uint32_t mode = 0644,
                 bool linked = false) {
    Entry e = Make(EntryKind::kFile, path, mode);
    e.size = content.size();
    e.linked = linked;
    return Add(std::move(e), std::move(content));
  }
  TreeSpec& Symlink(const std::string& path, const std::string& target) {
    Entry e = Make(EntryKind::kSymlink, path, 0777);
    e.link_target = target;
    return Add(std::move(e));
  }
  TreeSpec& Hardlink(const std::string& path, const std::string& target) {
    Entry e = Make(EntryKind::kHardlink, path, 0644);
    e.link_target = target;
    return Add(std::move(e));
  }
  TreeSpec& Fifo(const std::string& path) { return Add(Make(EntryKind::kFifo, path, 0640)); }
  TreeSpec& Add(Entry e, Bytes content = {}) {
    entries.push_back(std::move(e));
    contents.push_back(std::move(content));
    return *this;
  }
};

class TreeRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.Join("store")));
    auto store = datastore::Datastore::Open(*env_, dir_.Join("store"));
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    source_ = std::make_unique<CountingSource>(store_->chunks());
  }

  // Cuts `stream` into kPiece chunks, stores them (all but zero chunks when
  // `store_zero` is false) and returns the index.
  index::DynamicIndex Store(const Bytes& stream, bool store_zero = true) {
    std::vector<index::DynamicEntry> entries;
    for (uint64_t off = 0; off < stream.size(); off += kPiece) {
      ByteSpan plain(stream.data() + off, std::min<uint64_t>(kPiece, stream.size() - off));
      crypto::Digest id = crypto::Sha256(plain);
      entries.push_back({off + plain.size(), id});
      if (!store_zero && IsAllZero(plain)) continue;
      auto stored = blob::Encode(plain);
      EXPECT_TRUE(stored.ok());
      EXPECT_TRUE(store_->chunks().Insert(id, *stored).ok());
    }
    return index::DynamicIndex(std::move(entries));
  }

  // Commits `spec` as root.tree of a new snapshot; payload_ holds its stream.
  void Commit(TreeSpec spec, bool store_zero = true) {
    payload_.clear();
    for (size_t i = 0; i < spec.entries.size(); ++i) {
      Entry& e = spec.entries[i];
      if (e.kind != EntryKind::kFile) continue;
      e.payload_offset = payload_.size();
      payload_.insert(payload_.end(), spec.contents[i].begin(), spec.contents[i].end());
    }
    auto meta = tree::EncodeTree(spec.entries);
    CAIRN_ASSERT_OK(meta);
    CommitStreams(*meta, store_zero);
  }

  void CommitStreams(const Bytes& meta, bool store_zero = true) {
    snap_ = datastore::SnapshotRef{group_, kT0 + 60 * commits_++};
    auto w = datastore::SnapshotWriter::Begin(*store_, snap_);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddTree("root.tree", Store(meta), Store(payload_, store_zero)));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
    auto manifest = store_->ReadManifest(snap_);
    CAIRN_ASSERT_OK(manifest);
    entry_ = *manifest->Find("root.tree");
  }

  Result<TreeRestoreStats> Restore(const std::string& target, TreeRestoreOptions options = {}) {
    return RestoreTree(*store_, *source_, snap_, entry_, target, options);
  }

  static struct stat Lstat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st;
  }
  static bool Exists(const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0;
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::unique_ptr<datastore::Datastore> store_;
  std::unique_ptr<CountingSource> source_;
  datastore::GroupRef group_{"", "host", "srv"};
  datastore::SnapshotRef snap_;
  index::ArchiveEntry entry_;
  Bytes payload_;
  int commits_ = 0;
};

TEST_F(TreeRestoreTest, RoundTripsEveryKindWithModesAndTimes) {
  const Bytes big = test_util::RandomBytes(3 * kPiece + 123, 1);
  const Bytes small = B("hello\n");
  TreeSpec spec;
  spec.Dir("bin", 0750, kMtime - 5)
      .File("bin/big", big, 0755)
      .File("bin/empty", {}, 0600)
      .Symlink("bin/link", "big")
      .Dir("etc", 0555, kMtime - 7)
      .Fifo("etc/fifo")
      .File("etc/hosts", small, 0644, /*linked=*/true)
      .Hardlink("etc/hosts2", "etc/hosts");
  spec.entries[2].xattrs = {{"user.cairn", "file"}};  // bin/big
  spec.entries[1].xattrs = {{"user.cairn", "dir"}};   // bin
  Commit(spec);
  const std::string t = dir_.Join("out");
  auto stats = Restore(t);
  CAIRN_ASSERT_OK(stats);

  // Xattrs, where the filesystem keeps user xattrs; a warning where not.
  char value[16];
  ssize_t n = ::lgetxattr((t + "/bin/big").c_str(), "user.cairn", value, sizeof(value));
  if (n >= 0) {
    EXPECT_EQ(std::string(value, n), "file");
    n = ::lgetxattr((t + "/bin").c_str(), "user.cairn", value, sizeof(value));
    ASSERT_GE(n, 0);
    EXPECT_EQ(std::string(value, n), "dir");
    EXPECT_TRUE(stats->warnings.empty());
  } else {
    ASSERT_EQ(stats->warnings.size(), 2u);
    EXPECT_NE(stats->warnings[0].find("user.cairn"), std::string::npos);
  }

  EXPECT_EQ(test_util::ReadFileOrFail(t + "/bin/big"), big);
  EXPECT_EQ(test_util::ReadFileOrFail(t + "/etc/hosts"), small);
  EXPECT_EQ(test_util::ReadFileOrFail(t + "/etc/hosts2"), small);
  EXPECT_EQ(Lstat(t + "/bin/empty").st_size, 0);
  EXPECT_EQ(Lstat(t + "/bin/big").st_mode & 07777, 0755u);
  EXPECT_EQ(Lstat(t + "/bin/empty").st_mode & 07777, 0600u);
  EXPECT_EQ(Lstat(t + "/bin").st_mode & 07777, 0750u);
  EXPECT_EQ(Lstat(t + "/etc").st_mode & 07777, 0555u);
  EXPECT_EQ(Lstat(t).st_mode & 07777, 0755u);
  EXPECT_TRUE(S_ISFIFO(Lstat(t + "/etc/fifo").st_mode));
  EXPECT_EQ(Lstat(t + "/etc/fifo").st_mode & 07777, 0640u);
  ASSERT_TRUE(S_ISLNK(Lstat(t + "/bin/link").st_mode));
  EXPECT_EQ(std::filesystem::read_symlink(t + "/bin/link").string(), "big");

  auto mtime = [](const struct stat& st) {
    return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  };
  EXPECT_EQ(mtime(Lstat(t + "/bin/big")), kMtime);
  EXPECT_EQ(mtime(Lstat(t + "/etc/hosts")), kMtime);
  EXPECT_EQ(mtime(Lstat(t + "/bin/link")), kMtime);
  // Directory times survive the restore of their children.
  EXPECT_EQ(mtime(Lstat(t + "/bin")), kMtime - 5);
  EXPECT_EQ(mtime(Lstat(t + "/etc")), kMtime - 7);
  EXPECT_EQ(mtime(Lstat(t)), kMtime);

  EXPECT_EQ(stats->dirs, 3u);  // the root, bin, etc
  EXPECT_EQ(stats->files, 3u);
  EXPECT_EQ(stats->symlinks, 1u);
  EXPECT_EQ(stats->hardlinks, 1u);
  EXPECT_EQ(stats->specials, 1u);
  EXPECT_EQ(stats->entries, 9u);
  EXPECT_EQ(stats->bytes, big.size() + small.size());
}

TEST_F(TreeRestoreTest, HardlinkIsRestoredAsALink) {
  TreeSpec spec;
  spec.Dir("a").File("a/f", test_util::RandomBytes(5000, 2), 0640, true)
      .Dir("b").Hardlink("b/g", "a/f").Hardlink("h", "a/f");
  Commit(spec);
  const std::string t = dir_.Join("out");
  CAIRN_ASSERT_OK(Restore(t));
  struct stat f = Lstat(t + "/a/f"), g = Lstat(t + "/b/g"), h = Lstat(t + "/h");
  EXPECT_EQ(f.st_ino, g.st_ino);
  EXPECT_EQ(f.st_ino, h.st_ino);
  EXPECT_EQ(f.st_nlink, 3u);
  EXPECT_EQ(f.st_mode & 07777, 0640u);
}

TEST_F(TreeRestoreTest, ZeroChunkStaysAHoleAndIsNeverFetched) {
  Bytes sparse = test_util::RandomBytes(kPiece, 3);
  Bytes zeros(4 * kPiece, 0);
  sparse.insert(sparse.end(), zeros.begin(), zeros.end());
  Bytes tail = test_util::RandomBytes(kPiece, 4);
  sparse.insert(sparse.end(), tail.begin(), tail.end());
  TreeSpec spec;
  spec.File("disk.raw", sparse);
  Commit(spec, /*store_zero=*/false);  // fetching a zero chunk would fail
  const std::string t = dir_.Join("out");
  auto stats = Restore(t);
  CAIRN_ASSERT_OK(stats);
  EXPECT_EQ(test_util::ReadFileOrFail(t + "/disk.raw"), sparse);
  struct stat st = Lstat(t + "/disk.raw");
  EXPECT_LT(st.st_blocks * 512, st.st_size);
  EXPECT_EQ(stats->zero_bytes, 4 * kPiece);
  EXPECT_EQ(stats->fetched_bytes, 2 * kPiece);
  EXPECT_EQ(source_->ReadsOf(crypto::Sha256(Bytes(kPiece, 0))), 0);
}

TEST_F(TreeRestoreTest, ZerosInsideFetchedChunksStayHoles) {
  // Sixteen distinct chunks, each zeros but for a few bytes.
  Bytes mostly_zero(16 * kPiece, 0);
  for (size_t i = 0; i < 16; ++i) {
    Bytes island = test_util::RandomBytes(10, 200 + i);
    std::copy(island.begin(), island.end(), mostly_zero.begin() + i * kPiece + 1000 * i);
  }
  TreeSpec spec;
  spec.File("islands", mostly_zero);
  Commit(spec);
  const std::string t = dir_.Join("out");
  auto stats = Restore(t);
  CAIRN_ASSERT_OK(stats);
  EXPECT_EQ(test_util::ReadFileOrFail(t + "/islands"), mostly_zero);
  EXPECT_EQ(stats->fetched_bytes, mostly_zero.size());
  EXPECT_LE(Lstat(t + "/islands").st_blocks * 512, 16 * 8192);
}

TEST_F(TreeRestoreTest, SharedChunkIsFetchedOnce) {
  const Bytes same = test_util::RandomBytes(kPiece, 5);
  TreeSpec spec;
  spec.Dir("d");
  // Ten small files in one chunk, then one chunk's content twice.
  for (int i = 0; i < 10; ++i) {
    spec.File(fmt::format("d/f{}", i), test_util::RandomBytes(100, 10 + i));
  }
  spec.File("d/pad", test_util::RandomBytes(kPiece - 1000, 6));
  spec.File("d/x1", same).File("d/x2", same);
  Commit(spec);
  auto stats = Restore(dir_.Join("out"));
  CAIRN_ASSERT_OK(stats);
  EXPECT_EQ(source_->ReadsOf(crypto::Sha256(same)), 1);
  EXPECT_EQ(source_->ReadsOf(crypto::Sha256(ByteSpan(payload_.data(), kPiece))), 1);
  EXPECT_EQ(stats->chunks, 2u);
  EXPECT_EQ(stats->fetched_bytes, 2u * kPiece);
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("out/d/x2")), same);
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("out/d/f3")), test_util::RandomBytes(100, 13));
}

TEST_F(TreeRestoreTest, ManyFilesSpanSeveralBatches) {
  TreeSpec spec;
  spec.Dir("d");
  constexpr int kFiles = 1500;  // three batches of at most 512 files
  for (int i = 0; i < kFiles; ++i) {
    spec.File(fmt::format("d/f{:04}", i), test_util::RandomBytes(200 + i, 100 + i), 0644, i == 0);
  }
  spec.Hardlink("e", "d/f0000");  // its target's batch is long done
  Commit(spec);
  const std::string t = dir_.Join("out");
  auto stats = Restore(t);
  CAIRN_ASSERT_OK(stats);
  EXPECT_EQ(stats->files, static_cast<uint64_t>(kFiles));
  for (int i = 0; i < kFiles; i += 97) {
    EXPECT_EQ(test_util::ReadFileOrFail(fmt::format("{}/d/f{:04}", t, i)),
              test_util::RandomBytes(200 + i, 100 + i));
  }
  EXPECT_EQ(test_util::ReadFileOrFail(fmt::format("{}/d/f{:04}", t, kFiles - 1)),
            test_util::RandomBytes(200 + kFiles - 1, 100 + kFiles - 1));
  EXPECT_EQ(Lstat(t + "/e").st_ino, Lstat(t + "/d/f0000").st_ino);
  // Every chunk at least once; a chunk straddling batches at most once more.
  const uint64_t chunks = (payload_.size() + kPiece - 1) / kPiece;
  EXPECT_GE(stats->chunks, chunks);
  EXPECT_LE(stats->chunks, chunks + 2);
}

TEST_F(TreeRestoreTest, IncludeRestoresMatchesWithTheirAncestors) {
  TreeSpec spec;
  spec.Dir("etc", 0711, kMtime - 9)
      .Dir("etc/conf.d")
      .File("etc/conf.d/a.conf", B("a"))
      .File("etc/conf.d/b.txt", B("b"))
      .File("etc/hosts", B("h"))
      .Dir("usr")
      .Dir("usr/share")
      .File("usr/share/x.conf", B("x"))
      .File("usr/y", B("y"));
  Commit(spec);

  const std::string t = dir_.Join("sub");
  TreeRestoreOptions options;
  options.includes = {"/etc/conf.d/"};
  auto stats = Restore(t, options);
  CAIRN_ASSERT_OK(stats);
  EXPECT_TRUE(Exists(t + "/etc/conf.d/a.conf"));
  EXPECT_TRUE(Exists(t + "/etc/conf.d/b.txt"));
  EXPECT_FALSE(Exists(t + "/etc/hosts"));
  EXPECT_FALSE(Exists(t + "/usr"));
  // The ancestor has its own metadata.
  EXPECT_EQ(Lstat(t + "/etc").st_mode & 07777, 0711u);
  EXPECT_EQ(Lstat(t + "/etc").st_mtim.tv_sec, (kMtime - 9) / 1'000'000'000);
  EXPECT_EQ(stats->files, 2u);
  EXPECT_EQ(stats->dirs, 3u);

  // A pattern without '/' matches names anywhere; unmatched ones warn.
  const std::string t2 = dir_.Join("names");
  options.includes = {"*.conf", "nothing-here"};
  stats = Restore(t2, options);
  CAIRN_ASSERT_OK(stats);
  EXPECT_TRUE(Exists(t2 + "/etc/conf.d/a.conf"));
  EXPECT_TRUE(Exists(t2 + "/usr/share/x.conf"));
  EXPECT_FALSE(Exists(t2 + "/etc/conf.d/b.txt"));
  EXPECT_FALSE(Exists(t2 + "/usr/y"));
  ASSERT_EQ(stats->warnings.size(), 1u);
  EXPECT_NE(stats->warnings[0].find("nothing-here"), std::string::npos);

  // Nothing matches at all: an error, and the new directory is gone.
  options.includes = {"nothing-here"};
  auto none = Restore(dir_.Join("none"), options);
  EXPECT_EQ(CodeOf(none), StatusCode::kNotFound);
  EXPECT_FALSE(Exists(dir_.Join("none")));
}

TEST_F(TreeRestoreTest, IncludedHardlinkWithoutItsTargetGetsTheContent) {
  const Bytes content = test_util::RandomBytes(7000, 7);
  TreeSpec spec;
  spec.Dir("a")
      .File("a/f", content, 0600, true)
      .Dir("b")
      .Hardlink("b/g", "a/f")
      .Hardlink("b/h", "a/f");
  Commit(spec);
  const std::string t = dir_.Join("out");
  TreeRestoreOptions options;
  options.includes = {"b"};
  auto stats = Restore(t, options);
  CAIRN_ASSERT_OK(stats);
  EXPECT_FALSE(Exists(t + "/a"));
  EXPECT_EQ(test_util::ReadFileOrFail(t + "/b/g"), content);
  EXPECT_EQ(Lstat(t + "/b/g").st_ino, Lstat(t + "/b/h").st_ino);
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->hardlinks, 1u);
}

TEST_F(TreeRestoreTest, TargetMustBeNewOrEmpty) {
  TreeSpec spec;
  spec.File("f", B("data"));
  Commit(spec);
  const std::string busy = dir_.Join("busy");
  ASSERT_EQ(::mkdir(busy.c_str(), 0755), 0);
  test_util::WriteFileOrFail(busy + "/keep", AsBytes("mine"));
  auto r = Restore(busy);
  EXPECT_EQ(CodeOf(r), StatusCode::kAlreadyExists);
  EXPECT_NE(r.status().message().find("not empty"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(busy),
                          std::filesystem::directory_iterator()),
            1);
  EXPECT_EQ(source_->TotalReads(), 0);

  test_util::WriteFileOrFail(dir_.Join("file"), AsBytes("x"));
  EXPECT_EQ(CodeOf(Restore(dir_.Join("file"))), StatusCode::kAlreadyExists);

  const std::string empty = dir_.Join("empty");
  ASSERT_EQ(::mkdir(empty.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(empty.c_str(), dir_.Join("link").c_str()), 0);
  auto via_link = Restore(dir_.Join("link"));
  EXPECT_EQ(CodeOf(via_link), StatusCode::kInvalidArgument) << via_link.status().ToString();
  EXPECT_NE(via_link.status().message().find("is a symlink"), std::string::npos);
  CAIRN_ASSERT_OK(Restore(empty + "/"));
  EXPECT_EQ(test_util::ReadFileOrFail(empty + "/f"), B("data"));
}

// The target is written through the Env: a disk that fills up (ENOSPC,
// injected) fails the restore with an error naming the file, and what was
// restored before stays.
TEST_F(TreeRestoreTest, FullDiskFromTheEnvFailsNamingTheFile) {
  TreeSpec spec;
  spec.Dir("d").File("d/first", B("small")).File("d/victim", test_util::RandomBytes(2 * kPiece, 9));
  Commit(spec);
  FaultInjectionEnv faulty(env_.get());
  faulty.SetWriteBudget(kPiece);
  TreeRestoreOptions options;
  options.env = &faulty;
  auto r = Restore(dir_.Join("out"), options);
  ASSERT_EQ(CodeOf(r), StatusCode::kResourceExhausted) << r.status().ToString();
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("out/d/victim"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left"), std::string::npos) << msg;
  EXPECT_NE(msg.find("left in"), std::string::npos) << msg;
  EXPECT_TRUE(Exists(dir_.Join("out/d/first")));
}

// Creating a directory, file, symlink, fifo or hard link that the Env
// fails (EIO, injected) fails the restore with an error naming that path.
TEST_F(TreeRestoreTest, CreateErrorFromTheEnvFailsNamingThePath) {
  TreeSpec spec;
  spec.Dir("sub")
      .Fifo("sub/fifo")
      .File("sub/file", B("content"), 0644, /*linked=*/true)
      .Hardlink("sub/hard", "sub/file")
      .Symlink("sub/link", "file");
  Commit(spec);
  FaultInjectionEnv faulty(env_.get());
  TreeRestoreOptions options;
  options.env = &faulty;
  int n = 0;
  for (const std::string path : {"sub", "sub/file", "sub/hard", "sub/link", "sub/fifo"}) {
    SCOPED_TRACE(path);
    faulty.FailCreatesMatching("/" + path);
    const std::string target = dir_.Join(fmt::format("out{}", n++));
    auto r = Restore(target, options);
    ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << r.status().ToString();
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find(target + "/" + path + ": Input/output error"), std::string::npos) << msg;
  }
  faulty.FailCreatesMatching("");
  auto r = Restore(dir_.Join("healthy"), options);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->files, 1u);
  EXPECT_EQ(r->hardlinks, 1u);
  EXPECT_EQ(r->symlinks, 1u);
  EXPECT_EQ(r->specials, 1u);
}

TEST_F(TreeRestoreTest, CorruptChunkFailsNamingFileAndChunk) {
  const Bytes content = test_util::RandomBytes(2 * kPiece, 8);
  TreeSpec spec;
  spec.Dir("d").File("d/victim", content);
  Commit(spec);
  const crypto::Digest bad = crypto::Sha256(ByteSpan(content.data() + kPiece, kPiece));
  source_->Corrupt(bad);
  auto r = Restore(dir_.Join("out"));
  ASSERT_EQ(CodeOf(r), StatusCode::kDataLoss) << r.status().ToString();
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("d/victim"), std::string::npos) << msg;
  EXPECT_NE(msg.find(crypto::DigestHex(bad)), std::string::npos) << msg;
  EXPECT_NE(msg.find("root.tree"), std::string::npos) << msg;
  EXPECT_NE(msg.find(snap_.ToString()), std::string::npos) << msg;
}

TEST_F(TreeRestoreTest, RehearseChecksEverythingAndWritesNothing) {
  const Bytes content = test_util::RandomBytes(3 * kPiece, 9);
  TreeSpec spec;
  spec.Dir("d").File("d/f", content).Symlink("d/l", "f").Fifo("p");
  Commit(spec);
  TreeRestoreOptions options;
  options.rehearse = true;
  const std::string t = dir_.Join("out");
  auto stats = Restore(t, options);
  CAIRN_ASSERT_OK(stats);
  EXPECT_FALSE(Exists(t));
  EXPECT_EQ(stats->fetched_bytes, content.size());
  EXPECT_EQ(stats->files, 1u);
  EXPECT_EQ(stats->symlinks, 1u);

  source_->Corrupt(crypto::Sha256(ByteSpan(content.data(), kPiece)));
  EXPECT_EQ(CodeOf(Restore(t, options)), StatusCode::kDataLoss);
  EXPECT_FALSE(Exists(t));
}

TEST_F(TreeRestoreTest, AbsoluteSymlinkIsNeverFollowed) {
  const std::string outside = dir_.Join("outside-xyz");
  TreeSpec spec;
  spec.Symlink("a", outside).Symlink("b", dir_.path()).File("c", B("c"));
  Commit(spec);
  const std::string t = dir_.Join("out");
  CAIRN_ASSERT_OK(Restore(t));
  ASSERT_TRUE(S_ISLNK(Lstat(t + "/a").st_mode));
  EXPECT_EQ(std::filesystem::read_symlink(t + "/a").string(), outside);
  EXPECT_FALSE(Exists(outside));
  EXPECT_FALSE(Exists(dir_.Join("c")));
}

TEST_F(TreeRestoreTest, CraftedNameIsRefusedAndNothingIsCreatedOutside) {
  // Encode a valid tree, then turn the name "zz" into ".." in its bytes.
  TreeSpec spec;
  spec.Dir("zz").File("zz/evil", B("x"));
  auto meta = tree::EncodeTree(spec.entries);
  CAIRN_ASSERT_OK(meta);
  Bytes crafted = *meta;
  size_t replaced = 0;
  for (size_t i = 0; i + 1 < crafted.size(); ++i) {
    if (crafted[i] == 'z' && crafted[i + 1] == 'z') {
      crafted[i] = crafted[i + 1] = '.';
      ++replaced;
    }
  }
  ASSERT_GT(replaced, 0u);
  payload_ = B("x");
  CommitStreams(crafted);
  const std::string t = dir_.Join("out");
  auto before = std::distance(std::filesystem::directory_iterator(dir_.path()),
                              std::filesystem::directory_iterator());
  auto r = Restore(t);
  EXPECT_EQ(CodeOf(r), StatusCode::kDataLoss) << r.status().ToString();
  EXPECT_NE(r.status().message().find("'..'"), std::string::npos) << r.status().ToString();
  EXPECT_FALSE(Exists(dir_.Join("evil")));
  EXPECT_FALSE(Exists(t));  // created, still empty, removed
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_.path()),
                          std::filesystem::directory_iterator()),
            before);
}

TEST_F(TreeRestoreTest, RunRestoreWiresTrees) {
  TreeSpec spec;
  spec.Dir("etc").File("etc/hosts", B("127.0.0.1\n"));
  Commit(spec);
  RestoreRequest request;
  request.snapshot = datastore::SnapshotSpec{group_, true, 0};
  request.archive = "root.tree";
  request.target = dir_.Join("one");
  auto report = RunRestore(*store_, request);
  CAIRN_ASSERT_OK(report);
  ASSERT_EQ(report->archives.size(), 1u);
  EXPECT_EQ(report->archives[0].kind, index::ArchiveKind::kTree);
  EXPECT_EQ(report->archives[0].tree.files, 1u);
  EXPECT_EQ(report->archives[0].stats.bytes, 10u);
  EXPECT_TRUE(Exists(dir_.Join("one/etc/hosts")));

  request.all = true;
  request.archive.clear();
  request.target = dir_.Join("all");
  CAIRN_ASSERT_OK(RunRestore(*store_, request));
  EXPECT_TRUE(Exists(dir_.Join("all/root/etc/hosts")));
  EXPECT_EQ(AllTargetPath("/x", entry_), "/x/root");

  request.all = false;
  request.archive = "root.tree";
  request.target = "-";
  auto to_stdout = RunRestore(*store_, request);
  EXPECT_EQ(CodeOf(to_stdout), StatusCode::kInvalidArgument);
  EXPECT_NE(to_stdout.status().message().find("standard output"), std::string::npos);

  request.target = dir_.Join("over");
  request.overwrite = true;
  EXPECT_EQ(CodeOf(RunRestore(*store_, request)), StatusCode::kInvalidArgument);
  request.overwrite = false;
  request.in_place = true;
  EXPECT_EQ(CodeOf(RunRestore(*store_, request)), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Exists(dir_.Join("over")));

  request.in_place = false;
  request.includes = {"etc"};
  request.target = dir_.Join("inc");
  CAIRN_ASSERT_OK(RunRestore(*store_, request));
  EXPECT_TRUE(Exists(dir_.Join("inc/etc/hosts")));
}

// The reader: entries in order, lookups, payload ranges.
class TreeReaderTest : public TreeRestoreTest {};

TEST_F(TreeReaderTest, ListsFindsAndReadsRanges) {
  const Bytes big = test_util::RandomBytes(5 * kPiece + 77, 11);
  TreeSpec spec;
  spec.Dir("a").File("a/small", B("tiny"))
      .Dir("a.b").File("a.b/big", big, 0644, true)
      .Hardlink("z", "a.b/big");
  Commit(spec);
  auto reader = chunkio::TreeArchiveReader::Open(*store_, *source_, snap_, entry_);
  CAIRN_ASSERT_OK(reader);
  std::vector<std::string> paths;
  while (true) {
    auto e = (*reader)->Next();
    CAIRN_ASSERT_OK(e);
    if (!e->has_value()) break;
    paths.push_back((*e)->path);
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"", "a", "a/small", "a.b", "a.b/big", "z"}));

  auto found = (*reader)->Find("a.b/big");
  CAIRN_ASSERT_OK(found);
  EXPECT_EQ(found->size, big.size());
  EXPECT_EQ(CodeOf((*reader)->Find("a/missing")), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf((*reader)->Find("zz")), StatusCode::kNotFound);
  auto root = (*reader)->Find("");
  CAIRN_ASSERT_OK(root);
  EXPECT_EQ(root->kind, EntryKind::kDirectory);

  Bytes got;
  CAIRN_ASSERT_OK((*reader)->ReadPayload(found->payload_offset, found->size, [&](ByteSpan p) {
    got.insert(got.end(), p.begin(), p.end());
    return Status::Ok();
  }));
  EXPECT_EQ(got, big);
  got.clear();
  CAIRN_ASSERT_OK((*reader)->ReadPayload(kPiece - 3, 10, [&](ByteSpan p) {
    got.insert(got.end(), p.begin(), p.end());
    return Status::Ok();
  }));
  EXPECT_EQ(got, Bytes(payload_.begin() + kPiece - 3, payload_.begin() + kPiece + 7));
  EXPECT_EQ(CodeOf((*reader)->ReadPayload(payload_.size() - 1, 2,
                                          [](ByteSpan) { return Status::Ok(); })),
            StatusCode::kOutOfRange);
}

// Many files with long names: a metadata stream of several kPiece chunks.
TreeSpec ManyFiles(int files) {
  TreeSpec spec;
  spec.Dir("d");
  for (int i = 0; i < files; ++i) {
    spec.File(fmt::format("d/{:05}-{}", i, std::string(150, 'n')), B("x"));
  }
  return spec;
}

// The metadata stream is fetched on the fetch pipeline, several chunks in
// flight, each once (one at a time, a remote source would cost a round
// trip per chunk).
TEST_F(TreeReaderTest, ReadsTheMetadataStreamWithReadsInFlight) {
  Commit(ManyFiles(3000));
  auto indexes = store_->ReadTreeIndexes(snap_, entry_);
  CAIRN_ASSERT_OK(indexes);
  const index::DynamicIndex& meta = indexes->meta;
  ASSERT_GE(meta.chunk_count(), 6u);
  source_->SetDelay(5);
  auto reader = chunkio::TreeArchiveReader::Open(*store_, *source_, snap_, entry_);
  CAIRN_ASSERT_OK(reader);
  size_t entries = 0;
  while (true) {
    auto e = (*reader)->Next();
    CAIRN_ASSERT_OK(e);
    if (!e->has_value()) break;
    ++entries;
  }
  EXPECT_EQ(entries, 3002u);
  EXPECT_GT(source_->MaxInFlight(), 1);
  EXPECT_EQ((*reader)->metadata_fetches(), 1u);  // all of it fits one window
  for (size_t i = 0; i < meta.chunk_count(); ++i) EXPECT_EQ(source_->ReadsOf(meta.digest(i)), 1);
}

// A damaged metadata chunk fails the stream where it is reached: the
// entries before it still come out, and the error names that chunk.
TEST_F(TreeReaderTest, EntriesBeforeADamagedMetadataChunkStillComeOut) {
  Commit(ManyFiles(3000));
  auto indexes = store_->ReadTreeIndexes(snap_, entry_);
  CAIRN_ASSERT_OK(indexes);
  ASSERT_GE(indexes->meta.chunk_count(), 6u);
  source_->Corrupt(indexes->meta.digest(4));
  auto reader = chunkio::TreeArchiveReader::Open(*store_, *source_, snap_, entry_);
  CAIRN_ASSERT_OK(reader);
  size_t entries = 0;
  Status error;
  while (true) {
    auto e = (*reader)->Next();
    if (!e.ok()) {
      error = e.status();
      break;
    }
    ASSERT_TRUE(e->has_value()) << "the stream ended without reaching the damage";
    ++entries;
  }
  EXPECT_EQ(error.code(), StatusCode::kDataLoss);
  EXPECT_NE(error.message().find("metadata chunk 4"), std::string::npos) << error.ToString();
  EXPECT_NE(error.message().find("archive root.tree"), std::string::npos) << error.ToString();
  // Chunks 0-3 hold roughly 4/N of the entries; all of those came out.
  EXPECT_GT(entries, 3000u * 3 / indexes->meta.chunk_count());
}

TEST_F(TreeReaderTest, ComparesPathsComponentByComponent) {
  EXPECT_LT(tree::CompareTreePaths("a/b", "a.b"), 0);
  EXPECT_LT(tree::CompareTreePaths("", "a"), 0);
  EXPECT_LT(tree::CompareTreePaths("a", "a/b"), 0);
  EXPECT_EQ(tree::CompareTreePaths("a/b", "a/b"), 0);
  EXPECT_GT(tree::CompareTreePaths("b", "a/z"), 0);
}

}  // namespace
}  // namespace cairn::restore
