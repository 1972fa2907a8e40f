#include "tree/fs_meta.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstring>

#include "tests/unit_test_util.h"

namespace cairn::tree {
namespace {

using test_util::CodeOf;
using ::testing::HasSubstr;

constexpr int64_t kMtime = 1'600'000'000'123'456'789;

// A temporary directory, open as a Dir as the backup walk and the restore
// hold it (and as an fd, for setting up with raw calls).
class FsMetaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dirfd_ = ::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(dirfd_, 0);
    auto d = env_->OpenDir(dir_.path());
    CAIRN_ASSERT_OK(d);
    d_ = std::move(*d);
  }
  void TearDown() override {
    if (dirfd_ >= 0) ::close(dirfd_);
  }

  void SetMtime(const std::string& name, int64_t ns) {
    struct timespec t[2] = {{0, UTIME_OMIT}, {ns / 1'000'000'000, ns % 1'000'000'000}};
    if (t[1].tv_nsec < 0) {  // floor division for times before 1970
      t[1].tv_nsec += 1'000'000'000;
      --t[1].tv_sec;
    }
    ASSERT_EQ(::utimensat(dirfd_, name.c_str(), t, AT_SYMLINK_NOFOLLOW), 0) << name;
  }

  struct stat Lstat(const std::string& name) {
    struct stat st {};
    EXPECT_EQ(::fstatat(dirfd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW), 0) << name;
    return st;
  }

  Result<Entry> Capture(const std::string& name, bool with_xattrs = true) {
    return CaptureEntry(*d_, name, "sub/" + name, Lstat(name), with_xattrs);
  }

  // Sets a user.* xattr; false when the filesystem refuses user xattrs.
  bool TrySetXattr(const std::string& name, const std::string& key, const std::string& value) {
    return ::lsetxattr(dir_.Join(name).c_str(), key.c_str(), value.data(), value.size(), 0) == 0;
  }

  test_util::TempDir dir_;
  int dirfd_ = -1;
  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Dir> d_;
};

TEST_F(FsMetaTest, CapturesFileDirectorySymlinkFifo) {
  test_util::WriteFileOrFail(dir_.Join("file"), AsBytes("hello"));
  ASSERT_EQ(::chmod(dir_.Join("file").c_str(), 04640), 0);
  SetMtime("file", kMtime);
  ASSERT_EQ(::mkdirat(dirfd_, "dir", 0750), 0);
  ASSERT_EQ(::fchmodat(dirfd_, "dir", 01750, 0), 0);
  ASSERT_EQ(::symlinkat("../some/target", dirfd_, "link"), 0);
  SetMtime("link", -1'500'000'000);  // before 1970
  ASSERT_EQ(::mkfifoat(dirfd_, "fifo", 0600), 0);
  ASSERT_EQ(::fchmodat(dirfd_, "fifo", 0604, 0), 0);

  auto file = Capture("file");
  CAIRN_ASSERT_OK(file);
  EXPECT_EQ(file->kind, EntryKind::kFile);
  EXPECT_EQ(file->name, "file");
  EXPECT_EQ(file->path, "sub/file");
  EXPECT_EQ(file->mode, 04640u);
  EXPECT_EQ(file->size, 5u);
  EXPECT_EQ(file->mtime_ns, kMtime);
  EXPECT_EQ(file->uid, ::getuid());
  EXPECT_EQ(file->gid, ::getgid());
  EXPECT_EQ(file->user, UserName(::getuid()));
  EXPECT_EQ(file->group, GroupName(::getgid()));

  auto dir = Capture("dir");
  CAIRN_ASSERT_OK(dir);
  EXPECT_EQ(dir->kind, EntryKind::kDirectory);
  EXPECT_EQ(dir->mode, 01750u);
  EXPECT_EQ(dir->size, 0u);

  auto link = Capture("link");
  CAIRN_ASSERT_OK(link);
  EXPECT_EQ(link->kind, EntryKind::kSymlink);
  EXPECT_EQ(link->link_target, "../some/target");
  EXPECT_EQ(link->mtime_ns, -1'500'000'000);
  EXPECT_EQ(link->size, 0u);

  auto fifo = Capture("fifo");
  CAIRN_ASSERT_OK(fifo);
  EXPECT_EQ(fifo->kind, EntryKind::kFifo);
  EXPECT_EQ(fifo->mode, 0604u);
}

TEST_F(FsMetaTest, CapturesTheDirectoryItselfByEmptyName) {
  ASSERT_EQ(::mkdirat(dirfd_, "sub", 0751), 0);
  auto sub = env_->OpenDir(dir_.Join("sub"));
  CAIRN_ASSERT_OK(sub);
  auto st = (*sub)->Lstat("");
  CAIRN_ASSERT_OK(st);
  auto e = CaptureEntry(**sub, "", "", *st, true);
  CAIRN_ASSERT_OK(e);
  EXPECT_EQ(e->kind, EntryKind::kDirectory);
  EXPECT_EQ(e->mode, 0751u);
}

TEST_F(FsMetaTest, XattrsRoundTripThroughApply) {
  test_util::WriteFileOrFail(dir_.Join("src"), AsBytes("a"));
  if (!TrySetXattr("src", "user.b", std::string("v\0w", 3)) || !TrySetXattr("src", "user.a", "")) {
    GTEST_SKIP() << "filesystem under " << dir_.path() << " refuses user xattrs";
  }
  ASSERT_EQ(::chmod(dir_.Join("src").c_str(), 0600), 0);
  SetMtime("src", kMtime);
  auto src = Capture("src");
  CAIRN_ASSERT_OK(src);
  ASSERT_EQ(src->xattrs.size(), 2u);
  EXPECT_EQ(src->xattrs[0], (Xattr{"user.a", ""}));  // sorted by name
  EXPECT_EQ(src->xattrs[1], (Xattr{"user.b", std::string("v\0w", 3)}));

  auto read = ReadXattrs(*d_, "src");
  CAIRN_ASSERT_OK(read);
  EXPECT_EQ(*read, src->xattrs);

  test_util::WriteFileOrFail(dir_.Join("dst"), AsBytes("b"));
  std::vector<std::string> warnings;
  CAIRN_ASSERT_OK(ApplyMetadata(*d_, "dst", *src, ApplyOptions{}, &warnings));
  EXPECT_TRUE(warnings.empty());
  auto dst = Capture("dst");
  CAIRN_ASSERT_OK(dst);
  dst->name = src->name;
  dst->path = src->path;
  EXPECT_EQ(*dst, *src);

  // Without xattrs requested, none are read.
  auto bare = Capture("src", false);
  CAIRN_ASSERT_OK(bare);
  EXPECT_TRUE(bare->xattrs.empty());
}

TEST_F(FsMetaTest, XattrsOfSymlinkTargetNotFollowed) {
  test_util::WriteFileOrFail(dir_.Join("target"), AsBytes("t"));
  if (!TrySetXattr("target", "user.t", "1")) GTEST_SKIP() << "no user xattrs here";
  ASSERT_EQ(::symlinkat("target", dirfd_, "link"), 0);
  auto xattrs = ReadXattrs(*d_, "link");
  CAIRN_ASSERT_OK(xattrs);
  EXPECT_TRUE(xattrs->empty());
}

TEST_F(FsMetaTest, AppliesTimesToTheSymlinkItself) {
  test_util::WriteFileOrFail(dir_.Join("target"), AsBytes("t"));
  SetMtime("target", kMtime);
  ASSERT_EQ(::symlinkat("target", dirfd_, "link"), 0);
  const mode_t target_mode = Lstat("target").st_mode;
  Entry e;
  e.kind = EntryKind::kSymlink;
  e.path = "link";
  e.link_target = "target";
  e.mode = 0;  // not applied to symlinks
  e.mtime_ns = 1'234'567'890'987'654'321;
  std::vector<std::string> warnings;
  CAIRN_ASSERT_OK(ApplyMetadata(*d_, "link", e, ApplyOptions{}, &warnings));
  struct stat link = Lstat("link");
  EXPECT_EQ(link.st_mtim.tv_sec, 1'234'567'890);
  EXPECT_EQ(link.st_mtim.tv_nsec, 987'654'321);
  struct stat target = Lstat("target");
  EXPECT_EQ(target.st_mtim.tv_sec * 1'000'000'000 + target.st_mtim.tv_nsec, kMtime);
  EXPECT_EQ(target.st_mode, target_mode);  // no chmod through the link
}

TEST_F(FsMetaTest, AppliesModeAndOwner) {
  test_util::WriteFileOrFail(dir_.Join("f"), AsBytes("x"));
  Entry e;
  e.kind = EntryKind::kFile;
  e.path = "f";
  e.mode = 02751;
  e.uid = ::getuid();
  e.gid = ::getgid();
  e.user = "no-such-user-cairn";  // by name falls back to the ids
  e.group = "no-such-group-cairn";
  e.mtime_ns = kMtime;
  CAIRN_ASSERT_OK(ApplyMetadata(*d_, "f", e, ApplyOptions{}, nullptr));
  struct stat st = Lstat("f");
  EXPECT_EQ(st.st_mode & 07777, 02751u);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_mtim.tv_sec * 1'000'000'000 + st.st_mtim.tv_nsec, kMtime);
}

TEST_F(FsMetaTest, CreateSpecialMakesSymlinkAndFifo) {
  Entry link;
  link.kind = EntryKind::kSymlink;
  link.path = "d/link";
  link.link_target = "/etc/passwd";
  CAIRN_ASSERT_OK(CreateSpecial(*d_, "link", link));
  auto captured = Capture("link");
  CAIRN_ASSERT_OK(captured);
  EXPECT_EQ(captured->link_target, "/etc/passwd");

  Entry fifo;
  fifo.kind = EntryKind::kFifo;
  fifo.path = "fifo";
  fifo.mode = 0600;
  CAIRN_ASSERT_OK(CreateSpecial(*d_, "fifo", fifo));
  EXPECT_TRUE(S_ISFIFO(Lstat("fifo").st_mode));
}

TEST_F(FsMetaTest, CreateSpecialRefusesExistingName) {
  test_util::WriteFileOrFail(dir_.Join("x"), AsBytes("keep"));
  Entry link;
  link.kind = EntryKind::kSymlink;
  link.path = "x";
  link.link_target = "elsewhere";
  EXPECT_EQ(CodeOf(CreateSpecial(*d_, "x", link)), StatusCode::kAlreadyExists);
  Entry fifo;
  fifo.kind = EntryKind::kFifo;
  fifo.path = "x";
  EXPECT_EQ(CodeOf(CreateSpecial(*d_, "x", fifo)), StatusCode::kAlreadyExists);
  EXPECT_EQ(test_util::ReadFileOrFail(dir_.Join("x")),
            Bytes(AsBytes("keep").begin(), AsBytes("keep").end()));
  Entry file;
  file.kind = EntryKind::kFile;
  EXPECT_EQ(CodeOf(CreateSpecial(*d_, "y", file)), StatusCode::kInvalidArgument);
}

TEST_F(FsMetaTest, CreateSpecialDeviceNeedsPrivilege) {
  Entry dev;
  dev.kind = EntryKind::kCharDevice;
  dev.path = "sub/null";
  dev.mode = 0666;
  dev.rdev = makedev(1, 3);
  Status s = CreateSpecial(*d_, "null", dev);
  if (s.ok()) {  // privileged: the node is there, with its numbers
    auto captured = Capture("null");
    CAIRN_ASSERT_OK(captured);
    EXPECT_EQ(captured->kind, EntryKind::kCharDevice);
    EXPECT_EQ(captured->rdev, makedev(1, 3));
  } else {
    EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
    EXPECT_THAT(std::string(s.message()), HasSubstr("sub/null"));
  }
}

TEST_F(FsMetaTest, RefusesSockets) {
  int sock = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(sock, 0);
  struct sockaddr_un addr {};
  addr.sun_family = AF_UNIX;
  std::string path = dir_.Join("sock");
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof(addr)), 0);
  auto e = Capture("sock");
  ::close(sock);
  EXPECT_EQ(CodeOf(e), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("socket"));
}

TEST(FsMetaNames, UnknownIdsHaveNoName) {
  EXPECT_EQ(UserName(4'000'000'000u), "");
  EXPECT_EQ(GroupName(4'000'000'000u), "");
  EXPECT_EQ(UserName(4'000'000'000u), "");  // cached
  EXPECT_EQ(UserName(0), "root");
}

}  // namespace
}  // namespace cairn::tree
