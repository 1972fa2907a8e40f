// A real full disk: the datastore on a size-limited tmpfs (mounted by the
// test; it needs root and skips without it). backup, restore and gc that run
// out of space fail with exit 1 and a message naming the path and saying the
// disk is full; nothing stored before is damaged; once there is space again
// the same commands succeed. (Injected ENOSPC and EIO for every path are in
// src/maintenance/io_error_test.cc; this checks the real errno end to end.)
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class FullDiskTest : public CliTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
    mnt_ = Path("small");
    std::filesystem::create_directories(mnt_);
    if (::mount("cairn-full-disk", mnt_.c_str(), "tmpfs", 0, "size=20m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here: " << std::strerror(errno);
    }
    mounted_ = true;
    store_ = mnt_ + "/store";
    RunResult r = Cairn({"init", store_});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }

  void Grow(const char* size) {
    std::string options = std::string("size=") + size;
    ASSERT_EQ(::mount("cairn-full-disk", mnt_.c_str(), "tmpfs", MS_REMOUNT, options.c_str()), 0)
        << std::strerror(errno);
  }

  // A full-disk failure as a user should see it.
  static void ExpectFullDisk(const RunResult& r, const std::string& path) {
    EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
    EXPECT_FALSE(r.killed()) << r.Describe();
    EXPECT_TRUE(Contains(r.err, "No space left on device")) << r.Describe();
    EXPECT_TRUE(Contains(r.err, path)) << r.Describe();
  }

  std::string mnt_;
  bool mounted_ = false;
};

TEST_F(FullDiskTest, BackupRestoreAndGcFailCleanlyAndWorkWithSpaceAgain) {
  // 8 MiB fits in the 20 MiB file system, 8 + 16 MiB does not.
  ImageWriter(Path("a.raw"), 2 * kChunk, 1).Random(0, 2 * kChunk);
  ImageWriter(Path("b.raw"), 4 * kChunk, 2).Random(0, 4 * kChunk);
  Backup("vm/100", 1, {"disk0.img=" + Path("a.raw")}, /*json=*/false);

  RunResult r = OnStore("backup", {"--id", "vm/100", "--time", SnapTime(2),
                                   "disk0.img=" + Path("b.raw")});
  ExpectFullDisk(r, store_);
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{Snap("vm/100", 1)});
  EXPECT_FALSE(Exists(SnapshotDir(store_, Snap("vm/100", 2))));

  // Restore onto the same (nearly full) file system.
  std::string target = mnt_ + "/restored.raw";
  r = OnStore("restore", {Snap("vm/100", 1), "disk0.img", target});
  ExpectFullDisk(r, target);
  EXPECT_FALSE(Exists(target));  // no half-written image under the target's name

  // gc on a file system with no byte left.
  {
    std::string filler = mnt_ + "/filler";
    FILE* f = std::fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string block(1 << 16, 'f');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    std::fclose(f);
  }
  r = OnStore("gc", {});
  ExpectFullDisk(r, store_);
  std::filesystem::remove(mnt_ + "/filler");

  // What was stored before is intact; with space, everything works.
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  ASSERT_NO_FATAL_FAILURE(Grow("64m"));
  Backup("vm/100", 2, {"disk0.img=" + Path("b.raw")}, /*json=*/false);
  r = OnStore("restore", {Snap("vm/100", 1), "disk0.img", target});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), target), "");
  r = OnStore("gc", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
