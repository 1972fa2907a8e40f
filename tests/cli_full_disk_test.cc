// A real full disk: the datastore on a size-limited tmpfs (mounted by the
// test; it needs root and skips without it). backup, restore and gc that run
// out of space fail with exit 1 and a message naming the path and saying the
// disk is full; nothing stored before is damaged; once there is space again
// the same commands succeed. The same for a backup through `cairn serve`
// whose datastore fills up: the client fails with exit 1 and the server's
// "No space left on device", the server goes on serving, and the backup
// succeeds once there is space. (Injected ENOSPC and EIO for every path are
// in src/maintenance/io_error_test.cc, EIO on chunk, index and manifest
// reads answered as corruption, exit 3; this checks the real errno end to
// end.)
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "cli_server_fixture.h"

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

TEST_F(FullDiskTest, BackupThroughTheServerFailsCleanlyAndWorksWithSpaceAgain) {
  ImageWriter(Path("a.raw"), 2 * kChunk, 1).Random(0, 2 * kChunk);
  ImageWriter(Path("b.raw"), 4 * kChunk, 2).Random(0, 4 * kChunk);
  const std::string state = Path("state");
  RunResult t = Cairn({"token", "create", "host1", "--state-dir", state, "--store", "main",
                       "--role", "backup"});
  ASSERT_EQ(t.exit_code, kExitOk) << t.Describe();
  const std::string token = t.out.substr(0, t.out.find('\n'));
  ServerProcess server({"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store_,
                        "--state-dir", state},
                       Path("server.err"));
  ASSERT_GT(server.port(), 0);
  RunOptions client;
  client.env = {"CAIRN_CACHE_DIR=" + Path("cache"), "CAIRN_TRUSTED_SERVERS=" + Path("servers"),
                "CAIRN_TOKEN=" + token, "CAIRN_FINGERPRINT=" + server.fingerprint()};
  const std::string url = "https://127.0.0.1:" + std::to_string(server.port()) + "/main";
  auto backup = [&](int t, const std::string& image) {
    return RunCairn({"backup", "-r", url, "--id", "vm/100", "--time", SnapTime(t),
                     "disk0.img=" + image},
                    client);
  };

  // 8 MiB fits in the 20 MiB file system, 8 + 16 MiB does not.
  RunResult r = backup(1, Path("a.raw"));
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = backup(2, Path("b.raw"));
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_FALSE(r.killed()) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "No space left on device")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, url)) << r.Describe();
  EXPECT_TRUE(server.alive()) << ReadFile(Path("server.err"));
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{Snap("vm/100", 1)});
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();

  // With space, the same backup through the same server succeeds.
  ASSERT_NO_FATAL_FAILURE(Grow("64m"));
  r = backup(2, Path("b.raw"));
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ListedSnapshots(), (std::vector<std::string>{Snap("vm/100", 1), Snap("vm/100", 2)}));
  const std::string target = Path("restored.raw");
  r = OnStore("restore", {Snap("vm/100", 2), "disk0.img", target});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("b.raw"), target), "");
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
