// `cairn nbd` and `cairn restore --instant` (issue 25) through the real
// binary and the real NBD clients (nbdinfo and nbdcopy from libnbd-bin,
// qemu-img and qemu-io from qemu-utils):
//   - a read-only export on a Unix socket: nbdinfo's view, nbdcopy and
//     qemu-img compare against the source image; SIGTERM ends it (exit 0,
//     socket gone);
//   - an encrypted snapshot: exported with its key over TCP, refused
//     without it;
//   - from a cairn server (https://): export and mount;
//   - --writable --overlay: the writes are read back, kept across exports,
//     and the datastore is unchanged (every chunk file, and verify);
//   - a damaged chunk: EIO for exactly the reads that touch it, reported once;
//   - an export killed with SIGKILL leaves no lock and a socket the next
//     export replaces;
//   - restore --instant: readable at once, a client's write kept in the
//     target, the target equal to the image with it, both times reported.
// Each test skips, saying which, when a client tool is missing (S3: see
// cli_s3_test.cc).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <thread>

#include "cli_background.h"
#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kTools = {"nbdinfo", "nbdcopy", "qemu-img", "qemu-io"};

// The image every test exports: random, text, a zero chunk, a repeat of
// the first chunk, a short tail.
void WriteTestImage(const std::string& path, uint64_t seed) {
  ImageWriter(path, 4 * kChunk + 5000, seed)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)
      .Copy(0, 3 * kChunk, kChunk)
      .Random(4 * kChunk, 5000);
}

// The URI an export announced: "… at nbd+unix:///disk0.img?socket=… (ready …".
std::string UriOf(const std::string& line) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex(R"((nbd(\+unix)?://\S+))"))) return "";
  return m[1];
}

class NbdTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (std::string missing = MissingTools(kTools); !missing.empty()) {
      GTEST_SKIP() << "not installed: " << missing << " (libnbd-bin, qemu-utils)";
    }
    image_ = Path("disk.img");
    WriteTestImage(image_, 31);
    Backup("vm/100", 1, {"disk0.img=" + image_}, false);
    snap_ = Snap("vm/100", 1);
    socket_ = Path("nbd.sock");
  }

  // cairn nbd -r STORE SNAP disk0.img --listen unix:SOCKET EXTRA…; waits until it exports.
  std::unique_ptr<BackgroundCairn> Export(std::vector<std::string> extra = {},
                                          std::vector<std::string> env = {},
                                          const std::string& repo = "") {
    std::vector<std::string> args = {"nbd", "-r", repo.empty() ? store() : repo, snap_,
                                     "disk0.img", "--listen", "unix:" + socket_};
    args.insert(args.end(), extra.begin(), extra.end());
    auto e = std::make_unique<BackgroundCairn>(args, Path("nbd.err"), env);
    uri_ = UriOf(e->WaitForLine("exporting"));
    EXPECT_NE(uri_, "") << e->out();
    return e;
  }

  // Copies the whole export to a file with nbdcopy.
  std::string CopyOut(const std::string& name) {
    const std::string out = Path(name);
    ShellResult r = Shell("nbdcopy '" + uri_ + "' " + out);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }
  ShellResult QemuIo(const std::string& commands, bool read_only = true) {
    return Shell("qemu-io -f raw " + std::string(read_only ? "-r " : "") + "'" + uri_ + "' " + commands);
  }

  std::string image_, snap_, socket_, uri_;
};

TEST_F(NbdTest, AReadOnlyExportMatchesTheImageForNbdinfoNbdcopyAndQemuImg) {
  auto e = Export();
  ShellResult info = Shell("nbdinfo --json '" + uri_ + "'");
  ASSERT_EQ(info.exit_code, 0) << info.output;
  nlohmann::json j = ParseJson(info.output);
  EXPECT_EQ(j["exports"][0]["export-size"], FileSize(image_));
  EXPECT_EQ(j["exports"][0]["is_read_only"], true);
  EXPECT_EQ(CompareFiles(CopyOut("copy.img"), image_), "");
  ShellResult cmp = Shell("qemu-img compare -f raw -F raw '" + uri_ + "' " + image_);
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  // Read-only: qemu-io cannot write.
  ShellResult w = QemuIo("-c 'write -P 0xab 0 4k'", /*read_only=*/false);
  EXPECT_NE(w.exit_code == 0 && w.output.find("wrote") != std::string::npos, true) << w.output;
  EXPECT_EQ(e->Stop(SIGTERM), kExitOk) << e->err();
  EXPECT_FALSE(Exists(socket_));
  EXPECT_NE(e->err().find("stopped by signal 15"), std::string::npos) << e->err();
}

TEST_F(NbdTest, AnEncryptedSnapshotIsExportedWithItsKeyOverTcpAndRefusedWithout) {
  const std::string key = Path("key.json");
  std::vector<std::string> env = {"CAIRN_PASSPHRASE=nbd-test", "CAIRN_TEST_WEAK_KDF=1"};
  RunOptions o;
  o.env = env;
  ASSERT_EQ(Cairn({"key", "create", key}, o).exit_code, kExitOk);
  RunResult b = OnStore("backup", {"--id", "vm/300", "--time", SnapTime(1), "--keyfile", key,
                                   "disk0.img=" + image_}, o);
  ASSERT_EQ(b.exit_code, kExitOk) << b.Describe();
  snap_ = Snap("vm/300", 1);
  std::vector<std::string> args = {"nbd", "-r", store(), snap_, "disk0.img", "--listen",
                                   "127.0.0.1:0", "--keyfile", key};
  BackgroundCairn e(args, Path("nbd.err"), env);
  uri_ = UriOf(e.WaitForLine("exporting"));
  ASSERT_TRUE(uri_.starts_with("nbd://127.0.0.1:")) << uri_;
  ShellResult cmp = Shell("qemu-img compare -f raw -F raw '" + uri_ + "' " + image_);
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_EQ(e.Stop(SIGTERM), kExitOk);
  // Without the key: a clear refusal before anything is exported.
  RunResult no_key = OnStore("nbd", {snap_, "disk0.img", "--listen", "unix:" + socket_});
  EXPECT_NE(no_key.exit_code, kExitOk);
  EXPECT_NE(no_key.err.find("--keyfile"), std::string::npos) << no_key.Describe();
}

TEST_F(NbdTest, WritesGoToTheOverlayAndTheDatastoreIsUnchanged) {
  auto chunks_before = ChunkFiles(store());
  std::map<std::string, std::string> contents_before;
  for (const auto& [id, path] : chunks_before) contents_before[id] = Sha256Hex(ReadFile(path));
  const std::string overlay = Path("overlay");
  std::string want = ReadFile(image_);
  {
    auto e = Export({"--writable", "--overlay", overlay});
    // A partial block, whole blocks across a chunk boundary, and the tail.
    ShellResult w = QemuIo("-c 'write -P 0xa1 100 10' -c 'write -P 0xb2 4190208 8192' "
                           "-c 'write -P 0xc3 " + std::to_string(want.size() - 700) + " 700' -c flush",
                           /*read_only=*/false);
    ASSERT_EQ(w.exit_code, 0) << w.output;
    std::fill(want.begin() + 100, want.begin() + 110, '\xa1');
    std::fill(want.begin() + 4190208, want.begin() + 4190208 + 8192, '\xb2');
    std::fill(want.end() - 700, want.end(), '\xc3');
    EXPECT_EQ(ReadFile(CopyOut("first.img")), want);
    EXPECT_EQ(e->Stop(SIGTERM), kExitOk) << e->err();
  }
  {
    auto e = Export({"--writable", "--overlay", overlay});  // the same overlay again
    EXPECT_EQ(ReadFile(CopyOut("second.img")), want);
    EXPECT_EQ(e->Stop(SIGTERM), kExitOk);
  }
  // The datastore: the same chunk files with the same bytes; verify passes;
  // a plain export still shows the image as backed up.
  auto chunks_after = ChunkFiles(store());
  ASSERT_EQ(chunks_after.size(), chunks_before.size());
  for (const auto& [id, path] : chunks_after) EXPECT_EQ(Sha256Hex(ReadFile(path)), contents_before[id]);
  EXPECT_EQ(OnStore("verify", {}).exit_code, kExitOk);
  auto e = Export();
  EXPECT_EQ(CompareFiles(CopyOut("plain.img"), image_), "");
  EXPECT_EQ(e->Stop(SIGTERM), kExitOk);
  // An overlay fits one image only.
  const std::string other = Path("other.img");
  ImageWriter(other, 2 * kChunk, 32).Random(0, 2 * kChunk);
  Backup("vm/101", 1, {"disk0.img=" + other}, false);
  RunResult wrong = OnStore("nbd", {Snap("vm/101", 1), "disk0.img", "--listen", "unix:" + socket_,
                                    "--writable", "--overlay", overlay});
  EXPECT_NE(wrong.exit_code, kExitOk);
  EXPECT_NE(wrong.err.find("belongs to another image"), std::string::npos) << wrong.Describe();
}

TEST_F(NbdTest, ADamagedChunkFailsExactlyTheReadsThatTouchItAndIsReportedOnce) {
  std::vector<std::string> ids = IndexDigests(SnapshotDir(store(), snap_) + "/disk0.img.fidx");
  const std::string bad = ChunkFiles(store()).at(ids[1]);  // the text chunk, used once
  FlipBit(bad, FileSize(bad) / 2, 5);
  auto e = Export();
  const std::string before = std::to_string(kChunk - 4096), inside = std::to_string(kChunk + 8192),
                    after = std::to_string(2 * kChunk);
  for (int round = 0; round < 2; ++round) {
    ShellResult ok1 = QemuIo("-c 'read " + before + " 4096'");
    EXPECT_EQ(ok1.exit_code, 0) << ok1.output;
    EXPECT_NE(ok1.output.find("read 4096/4096"), std::string::npos) << ok1.output;
    ShellResult failed = QemuIo("-c 'read " + inside + " 4096'");
    EXPECT_NE(failed.output.find("Input/output error"), std::string::npos) << failed.output;
    ShellResult ok2 = QemuIo("-c 'read " + after + " 4096'");
    EXPECT_NE(ok2.output.find("read 4096/4096"), std::string::npos) << ok2.output;
  }
  EXPECT_EQ(e->Stop(SIGTERM), kExitOk);
  const std::string err = e->err();
  size_t count = 0;
  for (size_t at = err.find(ids[1]); at != std::string::npos; at = err.find(ids[1], at + 1)) ++count;
  EXPECT_EQ(count, 1u) << err;
}

TEST_F(NbdTest, AKilledExportLeavesNoLockAndItsSocketIsReplaced) {
  auto e = Export();
  RunResult busy = OnStore("forget", {snap_});  // exported: in use
  EXPECT_NE(busy.exit_code, kExitOk) << busy.Describe();
  e->Kill();
  EXPECT_TRUE(Exists(socket_));  // left behind by the kill
  auto again = Export();
  EXPECT_EQ(CompareFiles(CopyOut("again.img"), image_), "");
  EXPECT_EQ(again->Stop(SIGTERM), kExitOk);
  RunResult forget = OnStore("forget", {snap_});
  EXPECT_EQ(forget.exit_code, kExitOk) << forget.Describe();
}

TEST_F(NbdTest, AnInstantRestoreIsReadableAtOnceAndKeepsAClientsWrite) {
  const std::string target = Path("target.img");
  // A slow source (400 ms a read, one at a time): the restore reaches the
  // tail chunk (its third fetch) after 1.2 s; the client writes there first.
  std::vector<std::string> args = {"restore", "-r", store(), snap_, "disk0.img", target,
                                   "--instant", "--listen", "unix:" + socket_, "--json",
                                   "--inject-latency", "400", "--jobs", "1"};
  BackgroundCairn r(args, Path("instant.err"));
  nlohmann::json ready = ParseJson(r.WaitForLine("\"ready\""));
  uri_ = ready.value("uri", "");
  ASSERT_NE(uri_, "") << r.out();
  ShellResult w = QemuIo("-c 'write -P 0x5c " + std::to_string(4 * kChunk + 100) + " 1000' -c flush",
                         /*read_only=*/false);
  ASSERT_EQ(w.exit_code, 0) << w.output;
  std::string want = ReadFile(image_);
  std::fill(want.begin() + 4 * kChunk + 100, want.begin() + 4 * kChunk + 1100, '\x5c');
  EXPECT_EQ(ReadFile(CopyOut("during.img")), want);
  nlohmann::json done = ParseJson(r.WaitForLine("\"restored\""));
  EXPECT_GT(done.value("restored_seconds", 0.0), done.value("ready_seconds", 1e9));
  EXPECT_EQ(done.value("chunks_written_by_clients", 0), 1) << done.dump();
  EXPECT_EQ(ReadFile(target), want);  // the image, with the client's write
  EXPECT_EQ(ReadFile(CopyOut("after.img")), want);
  EXPECT_EQ(r.Stop(SIGTERM), kExitOk) << r.err();
  EXPECT_EQ(ReadFile(target), want);
  EXPECT_FALSE(Exists(target + ".partial"));
}

// Through a cairn server: the export and the mount read its chunks.
class NbdServerStoreTest : public ServerTest {};

TEST_F(NbdServerStoreTest, AnImageIsExportedAndMountedFromAServer) {
  if (std::string missing = MissingTools({"qemu-img"}); !missing.empty()) {
    GTEST_SKIP() << "not installed: " << missing;
  }
  const std::string sock = Path("nbd.sock");
  BackgroundCairn e({"nbd", "-r", url_, "vm/100/latest", "disk0.img", "--listen", "unix:" + sock},
                    Path("nbd.err"), ClientEnv(reader_));
  const std::string uri = UriOf(e.WaitForLine("exporting"));
  ShellResult cmp = Shell("qemu-img compare -f raw -F raw '" + uri + "' " + image_);
  EXPECT_EQ(cmp.exit_code, 0) << cmp.output;
  EXPECT_EQ(e.Stop(SIGTERM), kExitOk) << e.err();
  if (std::string why = FuseUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
  const std::string mnt = Path("mnt");
  fs::create_directories(mnt);
  BackgroundCairn m({"mount", "-r", url_, mnt, "vm/100", "--remote-refresh", "0.2"},
                    Path("mount.err"), ClientEnv(reader_));
  if (std::string why = WaitMounted(m); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(CompareFiles(mnt + "/latest/disk0.img", image_), "");
  EXPECT_EQ(ReadFile(mnt + "/" + SnapTime(1) + "/root.tree/etc/app/config"),
            ReadFile(tree_ + "/etc/app/config"));
  // A snapshot made on the server's store appears in the mount.
  Backup("vm/100", 3, {"disk0.img=" + image_}, false);
  const std::vector<std::string> want = {SnapTime(1), SnapTime(2), SnapTime(3), "latest"};
  for (int i = 0; i < 300 && ListDir(mnt) != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(ListDir(mnt), want);
  EXPECT_EQ(m.Stop(SIGTERM), kExitOk) << m.err();
  ForceUnmount(mnt);
}

}  // namespace
}  // namespace cairn::cli_test
