// `cairn mount` (issue 25) through the real binary and the kernel's FUSE:
//   - one mount of a whole datastore, shared by the suite: an image read
//     byte for byte (whole and at random offsets), a tree compared with its
//     source entry by entry (types, modes, owners, times in ns, sizes,
//     symlink targets, hardlinks as one inode, xattrs, contents), a blob,
//     `latest` links, an encrypted snapshot read with its key, a new
//     snapshot appearing without remounting, a damaged chunk failing
//     exactly the reads that touch it (reported once), and the mount ended
//     by SIGINT;
//   - a mount killed with SIGKILL while a file is open: the test's cleanup
//     (fusermount3 -u -z) leaves no mount, a new mount on the stale
//     mountpoint says how to clear it, and no lock is left on the store;
//   - concurrent reads of one chunk fetch it once;
//   - --daemon, ended by fusermount3 -u.
// Every test skips, saying why, where /dev/fuse or fusermount3 is missing or
// the machine refuses FUSE mounts (no CAP_SYS_ADMIN).
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <thread>

#include "cli_background.h"
#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

namespace fs = std::filesystem;

// Snapshot times of the suite's backups.
constexpr int kTimeMain = 1;
constexpr int kTimeNew = 50;

// Everything one suite shares: a datastore with these snapshots, their
// sources, and one mount of the whole datastore.
struct Shared {
  std::unique_ptr<TempDir> tmp;
  std::string store, image, tree, blob, bad_image, enc_image, key, mountpoint;
  std::unique_ptr<BackgroundCairn> mount;
  std::string why_skip;
  bool xattrs = false;  // the source file system took user xattrs
};
Shared* shared = nullptr;

std::vector<std::string> KeyEnv() {
  return {"CAIRN_KEYFILE=" + shared->key, "CAIRN_PASSPHRASE=mount-test", "CAIRN_TEST_WEAK_KDF=1"};
}

void SetTimes(const std::string& path, int64_t sec, long nsec) {
  timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// A tree with every kind of entry and metadata a tree archive keeps.
void MakeTree(const std::string& root, bool* xattrs) {
  fs::create_directories(root + "/etc/app");
  fs::create_directories(root + "/private");
  fs::create_directories(root + "/empty dir");
  WriteFile(root + "/etc/hosts", "127.0.0.1 localhost\n::1 localhost\n");
  WriteFile(root + "/etc/app/config", "port = 8007\n");
  WriteFile(root + "/private/secret", "s3cr3t");
  WriteFile(root + "/empty", "");
  WriteFile(root + "/ä ö.txt", "unicode names\n");
  ImageWriter(root + "/big.bin", 5 * kMiB + 77, 21).Random(0, 5 * kMiB + 77);
  ImageWriter(root + "/sparse.bin", 3 * kMiB, 22).Random(kMiB, 4096);
  ::chmod((root + "/private").c_str(), 0700);
  ::chmod((root + "/private/secret").c_str(), 0600);
  WriteFile(root + "/suid", "#!/bin/sh\n");
  ::chmod((root + "/suid").c_str(), 04755);
  ASSERT_EQ(::symlink("etc/hosts", (root + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("/nonexistent/target", (root + "/dangling").c_str()), 0);
  ASSERT_EQ(::link((root + "/etc/hosts").c_str(), (root + "/etc/app/hosts.hard").c_str()), 0);
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0640), 0);
  if (::geteuid() == 0) {
    ASSERT_EQ(::lchown((root + "/private/secret").c_str(), 1234, 5678), 0);
    ASSERT_EQ(::lchown((root + "/link").c_str(), 4321, 8765), 0);
    ASSERT_EQ(::mknod((root + "/null2").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }
  *xattrs = ::lsetxattr((root + "/etc/hosts").c_str(), "user.comment", "hosts file", 10, 0) == 0 &&
            ::lsetxattr((root + "/private").c_str(), "user.empty", "", 0, 0) == 0;
  // Times last, deepest first, so creating entries does not move them.
  int64_t t = 1700000000;
  for (const char* p : {"/etc/app/config", "/etc/hosts", "/private/secret", "/empty", "/ä ö.txt",
                        "/big.bin", "/sparse.bin", "/suid", "/link", "/dangling", "/fifo"}) {
    SetTimes(root + p, t++, 123456789);
  }
  for (const char* p : {"/etc/app", "/etc", "/private", "/empty dir", ""}) SetTimes(root + p, t++, 987654321);
}

RunResult OnStoreWith(const std::string& verb, std::vector<std::string> args,
                      std::vector<std::string> env = {}) {
  args.insert(args.begin(), {verb, "-r", shared->store});
  RunOptions o;
  o.env = std::move(env);
  return RunCairn(args, o);
}

void BackupOrFail(const std::string& id, int t, std::vector<std::string> archives,
                  std::vector<std::string> env = {}) {
  std::vector<std::string> args = {"--id", id, "--time", SnapTime(t)};
  args.insert(args.end(), archives.begin(), archives.end());
  RunResult r = OnStoreWith("backup", args, std::move(env));
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
}

class MountTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    shared = new Shared();
    shared->why_skip = FuseUnavailableReason();
    if (!shared->why_skip.empty()) return;
    shared->tmp = std::make_unique<TempDir>();
    const TempDir& t = *shared->tmp;
    shared->store = t.Join("store");
    ASSERT_EQ(RunCairn({"init", shared->store}).exit_code, kExitOk);
    // An image: random, text, a zero chunk, a repeat of the first, a tail.
    shared->image = t.Join("disk.img");
    ImageWriter(shared->image, 4 * kChunk + 5000, 11)
        .Random(0, kChunk)
        .Text(kChunk, kChunk)
        .Copy(0, 3 * kChunk, kChunk)
        .Random(4 * kChunk, 5000);
    shared->tree = t.Join("tree");
    MakeTree(shared->tree, &shared->xattrs);
    shared->blob = t.Join("vm.conf");
    WriteFile(shared->blob, "memory: 4096\ncores: 2\n");
    BackupOrFail("vm/100", kTimeMain, {"disk0.img=" + shared->image, "vm.conf.blob=" + shared->blob});
    BackupOrFail("host/web", kTimeMain, {"root.tree=" + shared->tree});
    // A snapshot whose chunks the suite damages (its own seed: no chunk shared).
    shared->bad_image = t.Join("bad.img");
    ImageWriter(shared->bad_image, 3 * kChunk, 12).Random(0, 3 * kChunk);
    BackupOrFail("vm/200", kTimeMain, {"disk0.img=" + shared->bad_image});
    // An encrypted snapshot.
    shared->key = t.Join("key.json");
    RunOptions ko;
    ko.env = KeyEnv();
    RunResult kr = RunCairn({"key", "create", shared->key}, ko);
    ASSERT_EQ(kr.exit_code, kExitOk) << kr.Describe();
    shared->enc_image = t.Join("enc.img");
    ImageWriter(shared->enc_image, kChunk + 999, 13).Random(0, kChunk + 999);
    BackupOrFail("vm/300", kTimeMain, {"disk0.img=" + shared->enc_image, "--keyfile", shared->key},
                 KeyEnv());
    shared->mountpoint = t.Join("mnt");
    fs::create_directories(shared->mountpoint);
    shared->mount = std::make_unique<BackgroundCairn>(
        std::vector<std::string>{"mount", "-r", shared->store, shared->mountpoint, "--keyfile",
                                 shared->key},
        t.Join("mount.err"), KeyEnv());
    // A machine that refuses FUSE mounts (a container without
    // CAP_SYS_ADMIN) skips the suite; any other error fails it.
    if (std::string why = WaitMounted(*shared->mount); !why.empty()) {
      shared->why_skip = why;
      shared->mount.reset();
      return;
    }
    ASSERT_TRUE(IsMounted(shared->mountpoint));
  }

  static void TearDownTestSuite() {
    if (shared->mount) {
      // SIGINT unmounts cleanly and exits 0.
      EXPECT_EQ(shared->mount->Stop(SIGINT), kExitOk) << shared->mount->err();
      EXPECT_FALSE(IsMounted(shared->mountpoint));
      ForceUnmount(shared->mountpoint);
    }
    delete shared;
    shared = nullptr;
  }

  void SetUp() override {
    if (!shared->why_skip.empty()) GTEST_SKIP() << shared->why_skip;
    ASSERT_TRUE(shared->mount && shared->mount->running()) << "the suite's mount is not running";
  }

  static std::string M(const std::string& rel) { return shared->mountpoint + "/" + rel; }
};

// Reads `len` bytes at `offset` with pread; the errno when it fails.
std::pair<std::string, int> Pread(const std::string& path, uint64_t offset, size_t len) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return {"", errno};
  std::string buf(len, '\0');
  size_t got = 0;
  int err = 0;
  while (got < len) {
    ssize_t n = ::pread(fd, buf.data() + got, len - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      err = errno;
      break;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(got);
  return {buf, err};
}

TEST_F(MountTest, AnImageIsAFileReadByteForByteAndAtRandom) {
  const std::string img = M("vm/100/" + SnapTime(kTimeMain) + "/disk0.img");
  EXPECT_EQ(FileSize(img), FileSize(shared->image));
  EXPECT_EQ(CompareFiles(img, shared->image), "");
  const std::string source = ReadFile(shared->image);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 40; ++i) {
    uint64_t off = rng() % source.size();
    size_t len = static_cast<size_t>(std::min<uint64_t>(1 + rng() % (2 * kMiB), source.size() - off));
    auto [got, err] = Pread(img, off, len);
    ASSERT_EQ(err, 0) << std::strerror(err);
    ASSERT_EQ(got, source.substr(off, len)) << "offset " << off << " length " << len;
  }
  struct stat st;
  ASSERT_EQ(::stat(img.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_blksize, 1 << 20);  // cat and cp read it 1 MiB at a time
  // Read past the page cache (direct I/O), yet a private mapping works.
  int fd = ::open(img.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* map = ::mmap(nullptr, source.size(), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
  EXPECT_EQ(std::memcmp(map, source.data(), source.size()), 0);
  ::munmap(map, source.size());
  // Read-only: no writing, not even by root.
  EXPECT_LT(::open(img.c_str(), O_WRONLY), 0);
  EXPECT_EQ(errno, EROFS);
}

// The image's zero chunk (chunk 2) is a hole: st_blocks leaves it out,
// SEEK_HOLE/SEEK_DATA find it, and `cp` (which asks for both) copies the
// image without reading it and keeps the hole.
TEST_F(MountTest, AnImagesZeroChunkIsAHoleThatCpKeeps) {
  const std::string img = M("vm/100/" + SnapTime(kTimeMain) + "/disk0.img");
  const uint64_t size = FileSize(shared->image);
  struct stat st;
  ASSERT_EQ(::stat(img.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_blocks), (size - kChunk + 511) / 512);
  int fd = ::open(img.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_EQ(::lseek(fd, 0, SEEK_HOLE), static_cast<off_t>(2 * kChunk));
  EXPECT_EQ(::lseek(fd, 2 * kChunk + 10, SEEK_DATA), static_cast<off_t>(3 * kChunk));
  EXPECT_EQ(::lseek(fd, 3 * kChunk, SEEK_HOLE), static_cast<off_t>(size));
  EXPECT_EQ(::lseek(fd, static_cast<off_t>(size), SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  ::close(fd);

  const std::string copy = shared->tmp->Join("copied.img");
  ShellResult cp = Shell("cp '" + img + "' '" + copy + "'");
  ASSERT_EQ(cp.exit_code, 0) << cp.output;
  EXPECT_EQ(CompareFiles(copy, shared->image), "");
  ASSERT_EQ(::stat(copy.c_str(), &st), 0);
  EXPECT_LE(static_cast<uint64_t>(st.st_blocks) * 512, size - kChunk / 2) << "the hole was not kept";
  fs::remove(copy);
}

TEST_F(MountTest, ABlobIsAFileAndLatestPointsAtTheNewest) {
  const std::string snap = SnapTime(kTimeMain);
  EXPECT_EQ(ReadFile(M("vm/100/" + snap + "/vm.conf.blob")), ReadFile(shared->blob));
  char target[256] = {};
  ASSERT_GT(::readlink(M("vm/100/latest").c_str(), target, sizeof target - 1), 0);
  EXPECT_EQ(std::string(target), snap);
  EXPECT_EQ(CompareFiles(M("vm/100/latest/disk0.img"), shared->image), "");
  EXPECT_EQ(ListDir(M("vm/100/" + snap)), (std::vector<std::string>{"disk0.img", "vm.conf.blob"}));
  std::vector<std::string> top = ListDir(shared->mountpoint);
  EXPECT_EQ(top, (std::vector<std::string>{"host", "vm"}));
  EXPECT_EQ(ListDir(M("vm")), (std::vector<std::string>{"100", "200", "300"}));
}

// Compares one entry of the source with the mount; `inodes` maps the
// source's inode numbers to the mount's, so hardlinks must agree.
void CompareEntry(const std::string& src, const std::string& mnt, const std::string& rel,
                  std::map<ino_t, ino_t>* inodes) {
  struct stat a, b;
  ASSERT_EQ(::lstat(src.c_str(), &a), 0) << src;
  ASSERT_EQ(::lstat(mnt.c_str(), &b), 0) << mnt << ": " << std::strerror(errno);
  EXPECT_EQ(a.st_mode, b.st_mode) << rel;  // type and all of 07777
  EXPECT_EQ(a.st_uid, b.st_uid) << rel;
  EXPECT_EQ(a.st_gid, b.st_gid) << rel;
  EXPECT_EQ(a.st_mtim.tv_sec, b.st_mtim.tv_sec) << rel;
  EXPECT_EQ(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec) << rel;
  if (S_ISREG(a.st_mode)) {
    EXPECT_EQ(a.st_size, b.st_size) << rel;
    EXPECT_EQ(a.st_nlink, b.st_nlink) << rel;
    auto [it, fresh] = inodes->emplace(a.st_ino, b.st_ino);
    EXPECT_EQ(it->second, b.st_ino) << rel << ": hardlinks must share an inode";
    EXPECT_EQ(CompareFiles(src, mnt), "") << rel;
  }
  if (S_ISLNK(a.st_mode)) {
    char ta[4096] = {}, tb[4096] = {};
    ASSERT_GT(::readlink(src.c_str(), ta, sizeof ta - 1), 0);
    ASSERT_GT(::readlink(mnt.c_str(), tb, sizeof tb - 1), 0) << rel;
    EXPECT_STREQ(ta, tb) << rel;
    EXPECT_EQ(a.st_size, b.st_size) << rel;
  }
  if (S_ISCHR(a.st_mode) || S_ISBLK(a.st_mode)) {
    EXPECT_EQ(a.st_rdev, b.st_rdev) << rel;
  }
  // xattrs, by name and value.
  auto xattrs = [](const std::string& p) {
    std::map<std::string, std::string> out;
    char names[4096];
    ssize_t n = ::llistxattr(p.c_str(), names, sizeof names);
    for (ssize_t i = 0; i < n;) {
      std::string name(names + i);
      char value[4096];
      ssize_t v = ::lgetxattr(p.c_str(), name.c_str(), value, sizeof value);
      if (name.starts_with("user.")) out[name] = std::string(value, static_cast<size_t>(std::max<ssize_t>(v, 0)));
      i += static_cast<ssize_t>(name.size()) + 1;
    }
    return out;
  };
  EXPECT_EQ(xattrs(src), xattrs(mnt)) << rel;
}

TEST_F(MountTest, ATreeMatchesItsSourceEntryByEntryWithItsMetadata) {
  const std::string mroot = M("host/web/" + SnapTime(kTimeMain) + "/root.tree");
  std::map<ino_t, ino_t> inodes;
  CompareEntry(shared->tree, mroot, "(root)", &inodes);
  size_t entries = 0;
  for (auto it = fs::recursive_directory_iterator(shared->tree); it != fs::end(it); ++it) {
    const std::string rel = it->path().lexically_relative(shared->tree).string();
    CompareEntry(it->path().string(), mroot + "/" + rel, rel, &inodes);
    if (it->is_directory() && !it->is_symlink()) {
      EXPECT_EQ(ListDir(it->path().string()), ListDir(mroot + "/" + rel)) << rel;
    }
    ++entries;
  }
  EXPECT_EQ(ListDir(shared->tree), ListDir(mroot));
  EXPECT_GE(entries, 15u);
  // The hardlink pair: one inode, two links.
  struct stat a, b;
  ASSERT_EQ(::stat((mroot + "/etc/hosts").c_str(), &a), 0);
  ASSERT_EQ(::stat((mroot + "/etc/app/hosts.hard").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_nlink, 2u);
  if (shared->xattrs) {
    char v[64] = {};
    EXPECT_EQ(::getxattr((mroot + "/etc/hosts").c_str(), "user.comment", v, sizeof v), 10);
    EXPECT_STREQ(v, "hosts file");
    EXPECT_EQ(::getxattr((mroot + "/etc/hosts").c_str(), "user.none", v, sizeof v), -1);
    EXPECT_EQ(errno, ENODATA);
  }
}

TEST_F(MountTest, AnEncryptedSnapshotReadsWithItsKey) {
  EXPECT_EQ(CompareFiles(M("vm/300/latest/disk0.img"), shared->enc_image), "");
}

TEST_F(MountTest, ANewSnapshotAppearsWithoutRemounting) {
  const std::string group = M("host/web");
  EXPECT_EQ(ListDir(group), (std::vector<std::string>{SnapTime(kTimeMain), "latest"}));
  BackupOrFail("host/web", kTimeNew, {"root.tree=" + shared->tree});
  // Listings are read again after a second: wait for it (a condition).
  std::vector<std::string> want = {SnapTime(kTimeMain), SnapTime(kTimeNew), "latest"};
  for (int i = 0; i < 300 && ListDir(group) != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ListDir(group), want);
  char target[256] = {};
  for (int i = 0; i < 300; ++i) {
    std::memset(target, 0, sizeof target);
    if (::readlink(M("host/web/latest").c_str(), target, sizeof target - 1) > 0 &&
        std::string(target) == SnapTime(kTimeNew)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(std::string(target), SnapTime(kTimeNew));
  EXPECT_EQ(ReadFile(M("host/web/latest/root.tree/etc/hosts")), ReadFile(shared->tree + "/etc/hosts"));
}

TEST_F(MountTest, ADamagedChunkFailsExactlyTheReadsThatTouchItAndIsReportedOnce) {
  const std::string snap_dir = SnapshotDir(shared->store, "vm/200/" + SnapTime(kTimeMain));
  std::vector<std::string> ids = IndexDigests(snap_dir + "/disk0.img.fidx");
  ASSERT_EQ(ids.size(), 3u);
  const std::string chunk_file = ChunkFiles(shared->store).at(ids[1]);
  FlipBit(chunk_file, FileSize(chunk_file) / 2, 3);
  const std::string img = M("vm/200/" + SnapTime(kTimeMain) + "/disk0.img");
  const std::string source = ReadFile(shared->bad_image);
  for (int round = 0; round < 3; ++round) {
    auto [before, e1] = Pread(img, kChunk - 4096, 4096);  // the last page before it
    EXPECT_EQ(e1, 0);
    EXPECT_EQ(before, source.substr(kChunk - 4096, 4096));
    auto [bad, e2] = Pread(img, kChunk + 100, 10);
    EXPECT_EQ(e2, EIO) << "round " << round;
    auto [after, e3] = Pread(img, 2 * kChunk, 4096);  // the first page after it
    EXPECT_EQ(e3, 0);
    EXPECT_EQ(after, source.substr(2 * kChunk, 4096));
  }
  // Reported once, naming the chunk, however many reads failed.
  const std::string err = shared->mount->err();
  size_t count = 0;
  for (size_t at = err.find(ids[1]); at != std::string::npos; at = err.find(ids[1], at + 1)) ++count;
  EXPECT_EQ(count, 1u) << err;
  EXPECT_NE(err.find("archive disk0.img of vm/200/" + SnapTime(kTimeMain)), std::string::npos) << err;
}

// Clears a mount a test left behind (it failed half-way, or killed it).
struct Unmounter {
  std::string path;
  ~Unmounter() { ForceUnmount(path); }
};

// A mount of `scope` on a mountpoint of its own; stderr in DIR/NAME.err.
std::unique_ptr<BackgroundCairn> MountOf(const std::string& mountpoint, std::vector<std::string> extra) {
  fs::create_directories(mountpoint);
  std::vector<std::string> args = {"mount", "-r", shared->store, mountpoint};
  args.insert(args.end(), extra.begin(), extra.end());
  auto m = std::make_unique<BackgroundCairn>(args, mountpoint + ".err");
  EXPECT_NE(m->WaitForLine("mounted"), "");
  return m;
}

TEST_F(MountTest, AKilledMountLeavesNoStaleMountAfterCleanupAndNoLock) {
  BackupOrFail("vm/400", kTimeMain, {"disk0.img=" + shared->blob});
  const std::string snap = "vm/400/" + SnapTime(kTimeMain);
  const std::string mnt = shared->tmp->Join("killed");
  Unmounter unmount{mnt};
  auto m = MountOf(mnt, {snap});
  // A file open in the mount pins its snapshot: forget refuses meanwhile.
  int fd = ::open((mnt + "/disk0.img").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  RunResult busy = OnStoreWith("forget", {snap});
  EXPECT_NE(busy.exit_code, kExitOk) << busy.Describe();
  m->Kill();
  ::close(fd);
  // What a kill leaves: a stale mount, which a new mount names.
  EXPECT_TRUE(IsMounted(mnt));
  RunResult again = RunCairn({"mount", "-r", shared->store, mnt});
  EXPECT_NE(again.exit_code, kExitOk);
  EXPECT_NE(again.err.find("fusermount3 -u"), std::string::npos) << again.Describe();
  // The tests' cleanup clears it; no lock was left behind.
  EXPECT_TRUE(ForceUnmount(mnt));
  EXPECT_FALSE(IsMounted(mnt));
  RunResult forget = OnStoreWith("forget", {snap});
  EXPECT_EQ(forget.exit_code, kExitOk) << forget.Describe();
}

TEST_F(MountTest, ConcurrentReadsOfOneChunkFetchItOnce) {
  // A one-chunk image, mounted alone behind a slow source: eight readers
  // of distinct parts of the chunk start together; the summary counts one
  // fetch, and readers that waited for it.
  const std::string one = shared->tmp->Join("one.img");
  ImageWriter(one, kChunk, 14).Random(0, kChunk);
  BackupOrFail("vm/500", kTimeMain, {"disk0.img=" + one});
  const std::string mnt = shared->tmp->Join("single");
  Unmounter unmount{mnt};
  auto m = MountOf(mnt, {"vm/500/" + SnapTime(kTimeMain), "--inject-latency", "500"});
  const std::string img = mnt + "/disk0.img";
  const std::string source = ReadFile(one);
  constexpr int kReaders = 8;
  std::barrier start(kReaders);
  std::atomic<int> ok{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      const uint64_t off = uint64_t(i) * (kChunk / kReaders);
      start.arrive_and_wait();
      auto [got, err] = Pread(img, off, 4096);
      if (err == 0 && got == source.substr(off, 4096)) ++ok;
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(ok.load(), kReaders);
  EXPECT_EQ(m->Stop(SIGTERM), kExitOk) << m->err();
  const std::string err = m->err();
  EXPECT_NE(err.find("fetched 1 chunks"), std::string::npos) << err;
  std::smatch joined;
  ASSERT_TRUE(std::regex_search(err, joined, std::regex(R"(joined fetches in progress (\d+))"))) << err;
  EXPECT_GE(std::stoi(joined[1]), 1) << err;
  EXPECT_FALSE(IsMounted(mnt));
}

TEST_F(MountTest, ADaemonMountEndsWithFusermountMinusU) {
  const std::string mnt = shared->tmp->Join("daemon");
  fs::create_directories(mnt);
  Unmounter unmount{mnt};
  RunResult r = RunCairn({"mount", "-r", shared->store, mnt, "vm/100", "--daemon"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::smatch pid;
  ASSERT_TRUE(std::regex_search(r.out, pid, std::regex(R"(pid (\d+))"))) << r.out;
  EXPECT_TRUE(IsMounted(mnt));
  EXPECT_EQ(CompareFiles(mnt + "/latest/disk0.img", shared->image), "");
  ShellResult u = Shell("fusermount3 -u '" + mnt + "'");
  EXPECT_EQ(u.exit_code, 0) << u.output;
  // Gone, or a zombie nobody reaped yet (its parent exited: init's now).
  const pid_t daemon = std::stoi(pid[1]);
  auto gone = [&] {
    if (::kill(daemon, 0) != 0) return true;
    std::string stat = ReadFile("/proc/" + std::to_string(daemon) + "/stat");
    size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
  };
  for (int i = 0; i < 600 && !gone(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(gone()) << "the daemon is still running after fusermount3 -u";
  EXPECT_FALSE(IsMounted(mnt));
}

}  // namespace
}  // namespace cairn::cli_test
