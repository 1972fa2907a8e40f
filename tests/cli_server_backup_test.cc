// Backup through `cairn serve` (docs/SERVER.md, "Backup sessions"), end to
// end with the real binary on both sides:
//   - a backup token backs up an image and a tree to https://…/main; a
//     reader restores both byte-identical, and the datastore on the server
//     verifies clean;
//   - --json reports the reads of the source in flight and the upload
//     connections (at least one, at most the cap, for a first backup);
//   - the second backup of unchanged data uploads no chunk (the previous
//     snapshot is the base) and opens no upload connection, and its --jobs
//     pins the reads in flight; one with a changed chunk uploads one;
//   - the group belongs to the token that created it: another backup token,
//     a reader token, and a backup token on a group it does not own are
//     refused with 403;
//   - a client killed mid-backup leaves no snapshot, the server goes on
//     serving, and once the idle session is aborted the group can be backed
//     up again, with nothing of the killed run left behind;
//   - `cairn benchmark -r https://…` measures the tls rows against it.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class ServerBackupTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    backup_ = Token("bk1", "main", "backup");
  }

  // Restarts the server with an idle backup session timeout of `seconds`.
  void RestartWithSessionTimeout(int seconds) {
    ASSERT_EQ(server_->Stop(), 0);
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--state-dir", state_, "--session-timeout",
                                 std::to_string(seconds)},
        Path("server2.err"));
    ASSERT_GT(server_->port(), 0);
    url_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/main";
  }

  // New chunks the backup --json output reports for archive `i`.
  static uint64_t NewChunks(const nlohmann::json& j, size_t i) {
    return j["archives"][i].value("new_chunks", uint64_t{0});
  }

  // Snapshot directories of group vm/ID in the server's datastore (finished
  // or not).
  std::vector<std::string> SnapshotDirs(const std::string& id) const {
    std::vector<std::string> out;
    std::string dir = store() + "/vm/" + id;
    if (!std::filesystem::exists(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.is_directory()) out.push_back(e.path().filename().string());
    }
    return out;
  }

  std::string backup_;
};

TEST_F(ServerBackupTest, BackupThroughTheServerRestoresByteIdentical) {
  RunResult r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(10), "--json",
                                  "disk0.img=" + image_, "root.tree=" + tree_},
                       backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_GT(NewChunks(j, 0), 0u) << r.out;
  // Reads of the source in flight, and the connections that uploaded.
  EXPECT_EQ(j["jobs"]["mode"], "auto") << r.out;
  EXPECT_GE(j["jobs"]["max"].get<int>(), 1) << r.out;
  ASSERT_TRUE(j.contains("connections")) << r.out;
  EXPECT_GE(j["connections"]["max"].get<int>(), 1) << r.out;
  EXPECT_LE(j["connections"]["max"].get<int>(), j["connections"]["cap"].get<int>()) << r.out;
  EXPECT_GT(j["connections"]["mean"].get<double>(), 0.0) << r.out;
  // One upload connection per core, at least 4, at most 8.
  EXPECT_EQ(j["connections"]["cap"].get<int>(),
            std::clamp(static_cast<int>(std::thread::hardware_concurrency()), 4, 8))
      << r.out;

  // The backup token sees its group, and the owner file names it.
  r = Remote("snapshots", {"--json"}, backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find(SnapTime(10)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(SnapTime(1)), std::string::npos) << r.out;  // vm/100 is not its group
  EXPECT_EQ(ReadFile(store() + "/vm/200/owner"), "bk1\n");

  std::string snap = "vm/200/" + SnapTime(10);
  std::string out = Path("restored.img");
  r = Remote("restore", {snap, "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  std::string tree_out = Path("restored-tree");
  r = Remote("restore", {snap, "root.tree", tree_out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ReadFile(tree_out + "/etc/app/config"), ReadFile(tree_ + "/etc/app/config"));
  EXPECT_EQ(ReadFile(tree_out + "/README"), ReadFile(tree_ + "/README"));

  // The server's datastore itself is sound.
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

TEST_F(ServerBackupTest, OnlyChunksTheBaseLacksAreSent) {
  RunResult r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(10), "--json",
                                  "disk0.img=" + image_, "root.tree=" + tree_},
                       backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(11), "--json", "--jobs", "1",
                        "disk0.img=" + image_, "root.tree=" + tree_},
             backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(NewChunks(j, 0), 0u) << r.out;
  EXPECT_EQ(j["jobs"]["mode"], "fixed") << r.out;
  EXPECT_EQ(j["jobs"]["max"], 1) << r.out;
  EXPECT_EQ(j["connections"]["max"], 0) << "nothing to upload, no upload connection: " << r.out;
  EXPECT_GT(j["archives"][1].value("reused_files", 0), 0) << r.out;  // the tree reused its base
  EXPECT_EQ(NewChunks(j, 1), 0u) << r.out;

  // One changed chunk: one chunk sent.
  {
    std::fstream f(image_, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(kChunk + 17));
    f.write("changed", 7);
  }
  r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(12), "--json",
                        "disk0.img=" + image_},
             backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(NewChunks(ParseJson(r.out), 0), 1u) << r.out;
  std::string out = Path("restored.img");
  r = Remote("restore", {"vm/200/" + SnapTime(12), "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
}

// A chunk a verify quarantined is stored again by the next backup through
// the server (issue 29, found by the soak): the client does not use the
// failed snapshot as its dedup base and sends the chunk; the server must not
// drop it as "held by the base" (the session's base is still that snapshot).
TEST_F(ServerBackupTest, TheBackupAfterAFailedVerifyHealsTheStore) {
  RunResult r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(10),
                                  "disk0.img=" + image_},
                       backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  const std::vector<std::string> ids =
      IndexDigests(SnapshotDir(store(), "vm/200/" + SnapTime(10)) + "/disk0.img.fidx");
  ASSERT_FALSE(ids.empty());
  const std::string chunk = ChunkFiles(store())[ids[0]];
  ASSERT_FALSE(chunk.empty());
  FlipBit(chunk, 100, 0);
  r = OnStore("verify", {});
  ASSERT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_FALSE(Exists(chunk)) << "verify did not quarantine " << chunk;

  r = Remote("backup", {"--id", "vm/200", "--time", SnapTime(11), "disk0.img=" + image_},
             backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(Exists(chunk)) << "the backup did not store the chunk again";
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  std::string out = Path("restored.img");
  r = Remote("restore", {"vm/200/" + SnapTime(11), "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
}

TEST_F(ServerBackupTest, GroupsBelongToTheTokenThatMadeThem) {
  std::vector<std::string> args = {"--id", "vm/200", "--time", SnapTime(10),
                                   "disk0.img=" + image_};
  ASSERT_EQ(Remote("backup", args, backup_).exit_code, 0);
  std::string other = Token("bk2", "main", "backup");
  args[3] = SnapTime(11);
  RunResult r = Remote("backup", args, other);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("does not own group vm/200"), std::string::npos) << r.Describe();
  // vm/100 was made on the server without a token: no backup token may add to it.
  r = Remote("backup", {"--id", "vm/100", "disk0.img=" + image_}, backup_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.Describe();
  // A reader may not back up at all.
  r = Remote("backup", args, reader_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("may not create snapshots"), std::string::npos) << r.Describe();
  // An admin may add to vm/100; its previous snapshot is the base.
  std::string admin = Token("admin1", "main", "admin");
  r = Remote("backup", {"--id", "vm/100", "--time", SnapTime(20), "--json",
                        "disk0.img=" + image_},
             admin);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(NewChunks(ParseJson(r.out), 0), 0u) << r.out;
  EXPECT_EQ(SnapshotDirs("200").size(), 1u);
}

TEST_F(ServerBackupTest, AClientKilledMidBackupLeavesNoSnapshot) {
  RestartWithSessionTimeout(2);
  // A larger image, so the backup is still uploading when it is killed.
  std::string big = Path("big.img");
  ImageWriter(big, 24 * kChunk, 99).Random(0, 24 * kChunk);
  RunOptions options;
  options.env = ClientEnv(backup_);
  bool begun = false;
  options.poll = [&](pid_t) {
    begun = !SnapshotDirs("300").empty();  // the session exists on the server
    return begun;
  };
  RunResult r = RunCairn({"backup", "-r", url_, "--id", "vm/300", "--time", SnapTime(30),
                          "disk0.img=" + big},
                         options);
  ASSERT_TRUE(begun) << r.Describe();
  EXPECT_NE(r.exit_code, 0) << r.Describe();

  // No snapshot appears, and the server goes on serving.
  r = Remote("snapshots", {"--json"}, backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out.find(SnapTime(30)), std::string::npos) << r.out;
  ASSERT_TRUE(server_->alive());
  std::string out = Path("restored.img");
  r = Remote("restore", {Snap("vm/100", 2), "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");

  // The idle session is aborted after 2 s: its directory goes and the
  // group can be backed up again.
  for (int i = 0; i < 100 && !SnapshotDirs("300").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(SnapshotDirs("300").empty());
  r = Remote("backup", {"--id", "vm/300", "--time", SnapTime(31), "disk0.img=" + image_},
             backup_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(SnapshotDirs("300"), std::vector<std::string>{SnapTime(31)});
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

// `cairn benchmark -r https://…`: the tls rows (upload, download) are
// measured against the server, on one connection and on one per core.
TEST_F(ServerBackupTest, BenchmarkMeasuresTlsRatesToTheServer) {
  RunResult r = Remote("benchmark", {"--seconds", "0.05", "--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  int found = 0;
  for (const auto& row : j["rows"]) {
    if (row["name"] == "tls" || row["name"] == "tls_download") {
      ++found;
      EXPECT_TRUE(row["per_core_mb_s"].is_number()) << row.dump();
      EXPECT_TRUE(row["all_cores_mb_s"].is_number()) << row.dump();
      EXPECT_NE(row["note"].get<std::string>().find("https://127.0.0.1"), std::string::npos);
    }
  }
  EXPECT_EQ(found, 2) << r.out;
  // A bad token is refused before anything is measured.
  r = Remote("benchmark", {"--seconds", "0.05"}, "nobody:00");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
