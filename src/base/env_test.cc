#include "base/env.h"

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn {
namespace {

using test_util::CodeOf;

class PosixEnvTest : public ::testing::Test {
 protected:
  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;

  std::vector<std::string> SortedList(const std::string& path) {
    auto names = env_->ListDir(path);
    EXPECT_TRUE(names.ok()) << names.status().ToString();
    if (!names.ok()) return {};
    std::sort(names->begin(), names->end());
    return *names;
  }

  void WriteNew(const std::string& path, std::string_view text) {
    auto f = env_->OpenWritable(path, OpenMode::kCreateNew);
    CAIRN_ASSERT_OK(f);
    CAIRN_ASSERT_OK((*f)->WriteAt(0, AsBytes(text)));
    CAIRN_ASSERT_OK((*f)->Close());
  }
};

TEST_F(PosixEnvTest, CreateListRenameRemoveStat) {
  std::string sub = dir_.Join("sub");
  CAIRN_ASSERT_OK(env_->CreateDir(sub));
  EXPECT_EQ(CodeOf(env_->CreateDir(sub)), StatusCode::kAlreadyExists);

  WriteNew(sub + "/a", "hello");
  WriteNew(sub + "/b", "");
  EXPECT_EQ(SortedList(sub), (std::vector<std::string>{"a", "b"}));

  auto info = env_->Stat(sub + "/a");
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->size, 5u);
  EXPECT_TRUE(info->is_regular);
  EXPECT_FALSE(info->is_dir);
  EXPECT_FALSE(info->is_block_device);
  EXPECT_NE(info->inode, 0u);
  EXPECT_GT(info->mtime_ns, 0);

  auto dir_info = env_->Stat(sub);
  CAIRN_ASSERT_OK(dir_info);
  EXPECT_TRUE(dir_info->is_dir);
  EXPECT_FALSE(dir_info->is_regular);

  CAIRN_ASSERT_OK(env_->Rename(sub + "/a", sub + "/c"));
  EXPECT_EQ(CodeOf(env_->Stat(sub + "/a")), StatusCode::kNotFound);
  auto renamed = env_->Stat(sub + "/c");
  CAIRN_ASSERT_OK(renamed);
  EXPECT_EQ(renamed->inode, info->inode);
  EXPECT_EQ(SortedList(sub), (std::vector<std::string>{"b", "c"}));

  EXPECT_NE(CodeOf(env_->RemoveDir(sub)), StatusCode::kOk);  // not empty
  CAIRN_ASSERT_OK(env_->RemoveFile(sub + "/b"));
  CAIRN_ASSERT_OK(env_->RemoveFile(sub + "/c"));
  EXPECT_EQ(CodeOf(env_->RemoveFile(sub + "/c")), StatusCode::kNotFound);
  CAIRN_ASSERT_OK(env_->RemoveDir(sub));
  EXPECT_EQ(CodeOf(env_->Stat(sub)), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(env_->ListDir(sub)), StatusCode::kNotFound);
}

// A Dir works on the names in it, never following a symlink there.
TEST_F(PosixEnvTest, DirCreatesListsAndNeverFollowsSymlinks) {
  auto dir = env_->OpenDir(dir_.path());
  CAIRN_ASSERT_OK(dir);
  Dir& d = **dir;
  CAIRN_ASSERT_OK(d.CreateDir("sub", 0700));
  auto file = d.CreateFile("f", 0600);
  CAIRN_ASSERT_OK(file);
  CAIRN_ASSERT_OK((*file)->Truncate(8192));
  CAIRN_ASSERT_OK((*file)->WriteAt(4096, AsBytes("tail")));
  CAIRN_ASSERT_OK((*file)->SetMode(0640));
  CAIRN_ASSERT_OK((*file)->SetModTime(1'600'000'000'000'000'001));
  CAIRN_ASSERT_OK((*file)->Close());
  EXPECT_EQ(CodeOf(d.CreateFile("f", 0600)), StatusCode::kAlreadyExists);
  CAIRN_ASSERT_OK(d.CreateSymlink("link", "sub"));
  CAIRN_ASSERT_OK(d.CreateNode("fifo", S_IFIFO | 0600, 0));
  auto sub = d.OpenDir("sub");
  CAIRN_ASSERT_OK(sub);
  CAIRN_ASSERT_OK((*sub)->CreateHardlink("hard", d, "f"));
  EXPECT_EQ((*sub)->path(), dir_.Join("sub"));

  EXPECT_EQ(SortedList(dir_.path()), (std::vector<std::string>{"f", "fifo", "link", "sub"}));
  auto names = d.List();
  CAIRN_ASSERT_OK(names);
  EXPECT_EQ(names->size(), 4u);
  auto st = d.Lstat("f");
  CAIRN_ASSERT_OK(st);
  EXPECT_EQ(st->st_size, 8192);
  EXPECT_EQ(st->st_mode & 07777, 0640u);
  EXPECT_EQ(st->st_mtim.tv_nsec, 1);
  EXPECT_EQ(st->st_nlink, 2u);
  auto link = d.Lstat("link");
  CAIRN_ASSERT_OK(link);
  EXPECT_TRUE(S_ISLNK(link->st_mode));
  auto target = d.ReadLink("link", 0);
  CAIRN_ASSERT_OK(target);
  EXPECT_EQ(*target, "sub");
  EXPECT_FALSE(d.OpenDir("link").ok());   // a symlink to a directory is not followed
  EXPECT_FALSE(d.OpenFile("link").ok());  // nor one to anything else
  auto self = d.Lstat("");
  CAIRN_ASSERT_OK(self);
  EXPECT_TRUE(S_ISDIR(self->st_mode));
  auto read = d.OpenFile("f");
  CAIRN_ASSERT_OK(read);
  auto info = (*read)->Stat();
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->size, 8192u);
  EXPECT_EQ(info->ctime_ns, int64_t{st->st_ctim.tv_sec} * 1'000'000'000 + st->st_ctim.tv_nsec);
  auto missing = d.Lstat("nope");
  EXPECT_EQ(CodeOf(missing), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir_.Join("nope")), std::string::npos)
      << missing.status().ToString();
}

TEST_F(PosixEnvTest, ErrorsNameThePath) {
  std::string missing = dir_.Join("no-such-file");
  auto r = env_->OpenReadable(missing);
  EXPECT_EQ(CodeOf(r), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(missing), std::string_view::npos) << r.status().ToString();
  auto st = env_->Stat(missing);
  EXPECT_NE(st.status().message().find(missing), std::string_view::npos);
  EXPECT_EQ(CodeOf(env_->OpenWritable(missing, OpenMode::kExisting)), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(env_->SyncDir(missing)), StatusCode::kNotFound);
}

TEST_F(PosixEnvTest, OpenModes) {
  std::string path = dir_.Join("f");
  WriteNew(path, "0123456789");
  EXPECT_EQ(CodeOf(env_->OpenWritable(path, OpenMode::kCreateNew)), StatusCode::kAlreadyExists);
  {
    auto f = env_->OpenWritable(path, OpenMode::kExisting);  // keeps contents
    CAIRN_ASSERT_OK(f);
    CAIRN_ASSERT_OK((*f)->WriteAt(2, AsBytes("ab")));
    CAIRN_ASSERT_OK((*f)->Close());
  }
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "01ab456789");
  {
    auto f = env_->OpenWritable(path, OpenMode::kTruncate);
    CAIRN_ASSERT_OK(f);
    CAIRN_ASSERT_OK((*f)->Close());
  }
  EXPECT_EQ(test_util::ReadFileOrFail(path).size(), 0u);
}

// kAppend: created when absent, contents kept, and every Append lands at the
// end of the file as it is then, through any descriptor (as from another
// process), even after someone else truncated it.
TEST_F(PosixEnvTest, AppendModeWritesAtTheEndThroughEveryDescriptor) {
  std::string path = dir_.Join("journal");
  auto a = env_->OpenWritable(path, OpenMode::kAppend);  // creates
  CAIRN_ASSERT_OK(a);
  auto b = env_->OpenWritable(path, OpenMode::kAppend);
  CAIRN_ASSERT_OK(b);
  CAIRN_ASSERT_OK((*a)->Append(AsBytes("aaa")));
  CAIRN_ASSERT_OK((*b)->Append(AsBytes("bb")));  // after a's bytes, not over them
  CAIRN_ASSERT_OK((*a)->Append(AsBytes("c")));
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "aaabbc");
  {
    auto t = env_->OpenWritable(path, OpenMode::kExisting);
    CAIRN_ASSERT_OK(t);
    CAIRN_ASSERT_OK((*t)->Truncate(2));
  }
  CAIRN_ASSERT_OK((*b)->Append(AsBytes("d")));  // at the new end, no hole
  CAIRN_ASSERT_OK((*b)->Sync());
  EXPECT_EQ(CodeOf((*a)->WriteAt(0, AsBytes("x"))), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*a)->EnableDirectWrites());
  CAIRN_ASSERT_OK((*a)->Close());
  CAIRN_ASSERT_OK((*b)->Close());
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "aad");

  auto c = env_->OpenWritable(path, OpenMode::kAppend);  // reopening keeps the contents
  CAIRN_ASSERT_OK(c);
  CAIRN_ASSERT_OK((*c)->Append(AsBytes("e")));
  CAIRN_ASSERT_OK((*c)->Close());
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "aade");
}

// Several writers, each with its own descriptor (the kernel treats them as
// it would several processes), append records concurrently: every record
// comes out whole and none is lost.
TEST_F(PosixEnvTest, ConcurrentAppendsNeverInterleaveOrOverwrite) {
  std::string path = dir_.Join("shared");
  constexpr int kWriters = 4;
  constexpr int kRecords = 300;
  constexpr size_t kRecordSize = 1000;
  {
    std::vector<std::jthread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        auto f = env_->OpenWritable(path, OpenMode::kAppend);
        CAIRN_ASSERT_OK(f);
        for (int r = 0; r < kRecords; ++r) {
          std::string record(kRecordSize, static_cast<char>('A' + w));
          CAIRN_ASSERT_OK((*f)->Append(AsBytes(record)));
        }
        CAIRN_ASSERT_OK((*f)->Close());
      });
    }
  }
  Bytes all = test_util::ReadFileOrFail(path);
  ASSERT_EQ(all.size(), kWriters * kRecords * kRecordSize);
  std::map<uint8_t, int> per_writer;
  for (size_t off = 0; off < all.size(); off += kRecordSize) {
    ASSERT_TRUE(std::all_of(all.begin() + off, all.begin() + off + kRecordSize,
                            [&](uint8_t c) { return c == all[off]; }))
        << "record at offset " << off << " is mixed";
    ++per_writer[all[off]];
  }
  for (int w = 0; w < kWriters; ++w) EXPECT_EQ(per_writer[static_cast<uint8_t>('A' + w)], kRecords);
}

TEST_F(PosixEnvTest, ReadableFileReadsShortOnlyAtEnd) {
  std::string path = dir_.Join("r");
  Bytes data = test_util::RandomBytes(1000, 1);
  test_util::WriteFileOrFail(path, data);
  auto f = env_->OpenReadable(path);
  CAIRN_ASSERT_OK(f);
  EXPECT_EQ((*f)->path(), path);
  auto size = (*f)->Size();
  CAIRN_ASSERT_OK(size);
  EXPECT_EQ(*size, 1000u);

  Bytes buf(300);
  auto n = (*f)->ReadAt(100, buf);
  CAIRN_ASSERT_OK(n);
  EXPECT_EQ(*n, 300u);
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), data.begin() + 100));

  n = (*f)->ReadAt(900, buf);
  CAIRN_ASSERT_OK(n);
  EXPECT_EQ(*n, 100u);
  EXPECT_TRUE(std::equal(buf.begin(), buf.begin() + 100, data.begin() + 900));

  n = (*f)->ReadAt(5000, buf);
  CAIRN_ASSERT_OK(n);
  EXPECT_EQ(*n, 0u);
}

TEST_F(PosixEnvTest, WritableFileAppendTruncateStat) {
  std::string path = dir_.Join("w");
  auto f = env_->OpenWritable(path, OpenMode::kCreateNew);
  CAIRN_ASSERT_OK(f);
  WritableFile& w = **f;
  EXPECT_EQ(w.path(), path);
  CAIRN_ASSERT_OK(w.Append(AsBytes("abc")));
  CAIRN_ASSERT_OK(w.Append(AsBytes("def")));
  CAIRN_ASSERT_OK(w.Truncate(1 << 20));  // extends with a hole
  auto info = w.Stat();
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->size, 1u << 20);
  CAIRN_ASSERT_OK(w.Truncate(4));
  CAIRN_ASSERT_OK(w.Sync());
  CAIRN_ASSERT_OK(w.Close());
  CAIRN_EXPECT_OK(w.Close());  // idempotent
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "abcd");
}

// Direct writes where the file system has them (a disk under /var/tmp),
// buffered where not (tmpfs): the bytes come out the same either way, for
// aligned and unaligned offsets, lengths and memory.
TEST_F(PosixEnvTest, DirectWritesAreExactWhereverTheyLand) {
  std::string dir = "/var/tmp";
  if (::access(dir.c_str(), W_OK) != 0) dir = dir_.path();
  std::string tmpl = dir + "/cairn-direct-XXXXXX";
  int fd = ::mkstemp(tmpl.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  for (const std::string& path : {tmpl, dir_.Join("direct.raw")}) {
    SCOPED_TRACE(path);
    auto f = env_->OpenWritable(path, OpenMode::kTruncate);
    CAIRN_ASSERT_OK(f);
    bool direct = (*f)->EnableDirectWrites();  // either way
    EXPECT_EQ((*f)->EnableDirectWrites(), direct);  // idempotent
    const size_t kSize = 5 * 65536 + 123;
    Bytes image = test_util::RandomBytes(kSize, 7);
    CAIRN_ASSERT_OK((*f)->Truncate(kSize));
    Bytes unaligned(65536 + 1);
    std::copy(image.begin() + 65536, image.begin() + 2 * 65536, unaligned.begin() + 1);
    CAIRN_ASSERT_OK((*f)->WriteAt(3 * 65536, ByteSpan(image).subspan(3 * 65536, 65536)));
    CAIRN_ASSERT_OK((*f)->WriteAt(65536, ByteSpan(unaligned).subspan(1)));  // memory unaligned
    CAIRN_ASSERT_OK((*f)->WriteAt(0, ByteSpan(image).subspan(0, 65536)));
    CAIRN_ASSERT_OK((*f)->WriteAt(2 * 65536, ByteSpan(image).subspan(2 * 65536, 65536)));
    CAIRN_ASSERT_OK((*f)->WriteAt(4 * 65536, ByteSpan(image).subspan(4 * 65536)));  // short tail
    CAIRN_ASSERT_OK((*f)->Sync());
    CAIRN_ASSERT_OK((*f)->Close());
    EXPECT_EQ(test_util::ReadFileOrFail(path), image);
  }
  ::unlink(tmpl.c_str());
}

TEST_F(PosixEnvTest, WriteFileAtomicReplacesAndLeavesNoTemp) {
  std::string path = dir_.Join("atomic");
  CAIRN_ASSERT_OK(WriteFileAtomic(*env_, path, AsBytes("first")));
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "first");
  CAIRN_ASSERT_OK(WriteFileAtomic(*env_, path, AsBytes("second, longer")));
  EXPECT_EQ(AsStringView(test_util::ReadFileOrFail(path)), "second, longer");
  CAIRN_ASSERT_OK(WriteFileAtomic(*env_, path, ByteSpan()));
  EXPECT_TRUE(test_util::ReadFileOrFail(path).empty());
  EXPECT_EQ(SortedList(dir_.path()), (std::vector<std::string>{"atomic"}));
  // A missing directory fails and creates nothing.
  EXPECT_EQ(CodeOf(WriteFileAtomic(*env_, dir_.Join("no/such"), AsBytes("x"))),
            StatusCode::kNotFound);
}

TEST_F(PosixEnvTest, ReadWholeFileHonoursSizeLimit) {
  std::string path = dir_.Join("whole");
  Bytes data = test_util::RandomBytes(4097, 2);
  test_util::WriteFileOrFail(path, data);
  auto at_limit = ReadWholeFile(*env_, path, 4097);
  CAIRN_ASSERT_OK(at_limit);
  EXPECT_EQ(*at_limit, data);
  auto over = ReadWholeFile(*env_, path, 4096);
  EXPECT_EQ(CodeOf(over), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find(path), std::string_view::npos);
  EXPECT_EQ(CodeOf(ReadWholeFile(*env_, dir_.Join("none"), 10)), StatusCode::kNotFound);

  test_util::WriteFileOrFail(path, ByteSpan());
  auto empty = ReadWholeFile(*env_, path, 0);
  CAIRN_ASSERT_OK(empty);
  EXPECT_TRUE(empty->empty());
}

TEST_F(PosixEnvTest, ReadWholeFileIntoReusesTheBuffer) {
  std::string path = dir_.Join("into");
  Bytes data = test_util::RandomBytes(1000, 3);
  test_util::WriteFileOrFail(path, data);
  ReadBuffer buffer;
  buffer.Resize(5000);
  const uint8_t* before = buffer.data();
  CAIRN_ASSERT_OK(ReadWholeFileInto(*env_, path, 1000, &buffer));
  EXPECT_EQ(Bytes(buffer.begin(), buffer.end()), data);
  EXPECT_EQ(buffer.data(), before);  // no new allocation
  EXPECT_EQ(CodeOf(ReadWholeFileInto(*env_, path, 999, &buffer)), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(ReadWholeFileInto(*env_, dir_.Join("none"), 10, &buffer)),
            StatusCode::kNotFound);
}

TEST_F(PosixEnvTest, ExclusiveLocksConflictAndReleaseOnDestruction) {
  std::string path = dir_.Join(".lock");
  auto first = env_->TryLock(path, /*exclusive=*/true);
  CAIRN_ASSERT_OK(first);
  auto second = env_->TryLock(path, /*exclusive=*/true);
  EXPECT_EQ(CodeOf(second), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(path), std::string_view::npos);
  EXPECT_EQ(CodeOf(env_->TryLock(path, /*exclusive=*/false)), StatusCode::kUnavailable);

  first->reset();  // releases the lock
  auto third = env_->TryLock(path, /*exclusive=*/true);
  CAIRN_EXPECT_OK(third);
}

TEST_F(PosixEnvTest, SharedLocksCoexistButExcludeWriters) {
  std::string path = dir_.Join("shared.lock");
  auto a = env_->TryLock(path, /*exclusive=*/false);
  auto b = env_->TryLock(path, /*exclusive=*/false);
  CAIRN_ASSERT_OK(a);
  CAIRN_ASSERT_OK(b);
  EXPECT_EQ(CodeOf(env_->TryLock(path, /*exclusive=*/true)), StatusCode::kUnavailable);
  a->reset();
  EXPECT_EQ(CodeOf(env_->TryLock(path, /*exclusive=*/true)), StatusCode::kUnavailable);
  b->reset();
  CAIRN_EXPECT_OK(env_->TryLock(path, /*exclusive=*/true));
}

TEST_F(PosixEnvTest, CreateDirsMakesParentsAndIsIdempotent) {
  std::string deep = dir_.Join("a/b/c/d");
  CAIRN_ASSERT_OK(CreateDirs(*env_, deep));
  auto info = env_->Stat(deep);
  CAIRN_ASSERT_OK(info);
  EXPECT_TRUE(info->is_dir);
  CAIRN_EXPECT_OK(CreateDirs(*env_, deep));
  CAIRN_EXPECT_OK(CreateDirs(*env_, deep + "/"));

  std::string file = dir_.Join("plain");
  test_util::WriteFileOrFail(file, AsBytes("x"));
  EXPECT_EQ(CodeOf(CreateDirs(*env_, file)), StatusCode::kAlreadyExists);
  EXPECT_FALSE(CreateDirs(*env_, file + "/under").ok());
}

TEST_F(PosixEnvTest, SyncCallsSucceedOnRealDirectories) {
  CAIRN_EXPECT_OK(env_->SyncDir(dir_.path()));
  CAIRN_EXPECT_OK(env_->SyncFilesystem(dir_.path()));
}

TEST_F(PosixEnvTest, Clocks) {
  EXPECT_GT(env_->NowUnixSeconds(), 1600000000);  // after 2020
  int64_t a = env_->NowMonotonicNanos();
  int64_t b = env_->NowMonotonicNanos();
  EXPECT_LE(a, b);
}

TEST(PathTest, JoinPath) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a", "//b/c"), "a/b/c");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
}

TEST(PathTest, DirName) {
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("a/b/"), "a");
  EXPECT_EQ(DirName("/a"), "/");
  EXPECT_EQ(DirName("/"), "/");
  EXPECT_EQ(DirName("file"), ".");
  EXPECT_EQ(DirName(""), ".");
}

TEST(EnvWrapperTest, ForwardsToTarget) {
  auto posix = NewPosixEnv();
  EnvWrapper wrapper(posix.get());
  EXPECT_EQ(wrapper.target(), posix.get());
  test_util::TempDir dir;
  CAIRN_ASSERT_OK(wrapper.CreateDir(dir.Join("x")));
  auto info = posix->Stat(dir.Join("x"));
  CAIRN_ASSERT_OK(info);
  EXPECT_TRUE(info->is_dir);
}

}  // namespace
}  // namespace cairn
