// Injected EIO through the real binary: the hidden test hook
// CAIRN_TEST_READ_EIO=SUBSTRING (cli/cli_util.h, NewProcessEnv) makes every
// read of a file whose path contains SUBSTRING fail with EIO, as a bad
// sector does, in `cairn` and in a `cairn serve` started with it. What a
// user must see, for a chunk, an index and a manifest that cannot be read:
//   - restore, verify and ls fail with a clear message that names the file
//     (or chunk) and says "Input/output error", exit 3 (the data cannot be
//     had; DataLoss, as cairn maps every EIO), never a crash;
//   - nothing in the store changes: no chunk renamed or quarantined (an I/O
//     error proves nothing about the bytes), no index or manifest touched;
//   - a backup whose dedup base cannot be read warns and backs up in full;
//     a backup that meets an unreadable chunk writes a good copy over it;
//   - once the fault is gone every command succeeds and restores are
//     byte-identical.
// (The same faults through the library, and ENOSPC, are unit-tested in
// src/maintenance/io_error_test.cc; a real full disk in cli_full_disk_test.cc.)
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

namespace fs = std::filesystem;

constexpr char kEioVariable[] = "CAIRN_TEST_READ_EIO";

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Every file of the store that holds data (chunks, indexes, manifests, the
// marker), by path relative to the store, with the SHA-256 of its bytes.
// Left out: what a read-only command may legitimately write (a snapshot's
// verify state, the verify ledger, lock files, running-backup markers).
std::map<std::string, std::string> StoredData(const std::string& store) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(store)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), store).string();
    const std::string name = e.path().filename().string();
    if (rel.starts_with(".ledger/") || rel.starts_with(".writers/") ||
        name == "verify.json.blob" || name == ".lock" || name.ends_with(".lock")) {
      continue;
    }
    out[rel] = Sha256Hex(ReadFile(e.path().string()));
  }
  return out;
}

class IoErrorCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    // disk0.img: two random chunks and a short text tail; root.tree: a few
    // small files and one of two chunks' worth.
    ImageWriter(Path("a.raw"), 2 * kChunk + 300 * kKiB, 1)
        .Random(0, 2 * kChunk)
        .Text(2 * kChunk, 300 * kKiB);
    fs::create_directories(Path("tree/etc"));
    WriteFile(Path("tree/etc/hosts"), "127.0.0.1 localhost\n");
    WriteFile(Path("tree/notes.txt"), std::string(70000, 'n'));
    ImageWriter(Path("tree/big.bin"), 3 * kMiB, 2).Random(0, 3 * kMiB);
    Backup("vm/100", 1, {"disk0.img=" + Path("a.raw"), "root.tree=" + Path("tree")}, false);
    snap_ = Snap("vm/100", 1);
    dir_ = SnapshotDir(store(), snap_);
    ids_ = IndexDigests(dir_ + "/disk0.img.fidx");
    ASSERT_EQ(ids_.size(), 3u);
    before_ = StoredData(store());
  }

  // cairn VERB -r STORE ARGS… with reads of paths containing `pattern`
  // failing with EIO.
  RunResult WithEio(const std::string& pattern, const std::string& verb,
                    std::vector<std::string> args) const {
    RunOptions o;
    o.env = {std::string(kEioVariable) + "=" + pattern};
    return OnStore(verb, std::move(args), o);
  }

  // An I/O error as a user should see it: exit 3, no crash, the file named.
  static void ExpectIoError(const RunResult& r, const std::string& names) {
    EXPECT_FALSE(r.killed()) << r.Describe();
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_TRUE(Contains(r.err + r.out, "Input/output error")) << r.Describe();
    EXPECT_TRUE(Contains(r.err + r.out, names)) << r.Describe();
  }

  // Nothing stored changed, and without the fault every command works and
  // the snapshot restores byte for byte.
  void ExpectIntactWithoutTheFault() {
    EXPECT_EQ(StoredData(store()), before_) << "the store changed under the I/O errors";
    RunResult r = OnStore("verify", {});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    fs::remove_all(Path("out"));
    r = OnStore("restore", {snap_, "--all", Path("out")});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(Path("a.raw"), Path("out/disk0.img")), "");
    EXPECT_EQ(CompareFiles(Path("tree/big.bin"), Path("out/root/big.bin")), "");
    EXPECT_EQ(ReadFile(Path("out/root/etc/hosts")), "127.0.0.1 localhost\n");
    r = OnStore("ls", {snap_, "root.tree"});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_TRUE(Contains(r.out, "big.bin")) << r.Describe();
  }

  std::string snap_, dir_;
  std::vector<std::string> ids_;  // disk0.img's chunk ids
  std::map<std::string, std::string> before_;
};

TEST_F(IoErrorCliTest, UnreadableChunkFailsRestoreAndVerifyAndIsLeftInPlace) {
  const std::string& id = ids_[1];
  const std::string chunk_path = ChunkFiles(store()).at(id);

  RunResult r = WithEio(id, "restore", {snap_, "disk0.img", Path("restored.raw")});
  ExpectIoError(r, id);
  EXPECT_FALSE(Exists(Path("restored.raw"))) << "a failed restore left its target";

  r = WithEio(id, "verify", {});
  ExpectIoError(r, id);
  EXPECT_TRUE(Contains(r.out, "not quarantined")) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "FAILED")) << r.Describe();
  // The chunk stays where it is: an I/O error proves nothing about it.
  EXPECT_TRUE(Exists(chunk_path));
  EXPECT_FALSE(Exists(chunk_path + ".bad"));

  r = WithEio(id, "verify", {"--json"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  nlohmann::json v = ParseJson(r.out);
  ASSERT_TRUE(v.is_object()) << r.Describe();
  EXPECT_EQ(v["ok"], false);
  EXPECT_TRUE(Contains(v["problems"].dump(), id)) << v["problems"].dump();

  // The verify state says FAILED until a verify reads the chunk again.
  ExpectIntactWithoutTheFault();
  r = OnStore("snapshots", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_FALSE(Contains(r.out, "FAILED")) << r.Describe();
}

TEST_F(IoErrorCliTest, UnreadableIndexFailsRestoreVerifyAndLsCleanly) {
  RunResult r = WithEio("disk0.img.fidx", "restore", {snap_, "disk0.img", Path("restored.raw")});
  ExpectIoError(r, "disk0.img.fidx");
  EXPECT_FALSE(Exists(Path("restored.raw")));
  r = WithEio("disk0.img.fidx", "verify", {snap_});
  ExpectIoError(r, "disk0.img.fidx");

  r = WithEio("root.tree.meta.didx", "ls", {snap_, "root.tree"});
  ExpectIoError(r, "root.tree.meta.didx");
  r = WithEio("root.tree.data.didx", "restore", {snap_, "root.tree", Path("restored-tree")});
  ExpectIoError(r, "root.tree.data.didx");
  r = WithEio(".didx", "verify", {});
  ExpectIoError(r, ".didx");

  ExpectIntactWithoutTheFault();
}

TEST_F(IoErrorCliTest, UnreadableManifestFailsRestoreVerifyAndLsCleanly) {
  const std::string manifest = "index.json.blob";
  RunResult r = WithEio(manifest, "restore", {snap_, "--all", Path("restored")});
  ExpectIoError(r, manifest);
  r = WithEio(manifest, "verify", {});
  ExpectIoError(r, manifest);
  r = WithEio(manifest, "ls", {snap_, "root.tree"});
  ExpectIoError(r, manifest);
  // The listing still lists the snapshot, and says what it could not read.
  r = WithEio(manifest, "snapshots", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Contains(r.out, snap_)) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "manifest unreadable")) << r.Describe();

  ExpectIntactWithoutTheFault();
}

TEST_F(IoErrorCliTest, BackupWhoseDedupBaseCannotBeReadBacksUpInFull) {
  // The base's indexes unreadable: a warning naming them, and a complete
  // snapshot (every chunk checked against the store instead).
  RunResult r = WithEio(".didx", "backup",
                        {"--id", "vm/100", "--time", SnapTime(2), "disk0.img=" + Path("a.raw"),
                         "root.tree=" + Path("tree")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "Input/output error")) << r.Describe();
  r = WithEio("disk0.img.fidx", "backup",
              {"--id", "vm/100", "--time", SnapTime(3), "disk0.img=" + Path("a.raw")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "disk0.img.fidx")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "Input/output error")) << r.Describe();
  // The base's manifest unreadable: the same, said once.
  const std::string base_manifest =
      SnapshotDir(store(), Snap("vm/100", 3)).substr(store().size()) + "/index.json.blob";
  r = WithEio(base_manifest, "backup",
              {"--id", "vm/100", "--time", SnapTime(4), "disk0.img=" + Path("a.raw")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "dedup base")) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "Input/output error")) << r.Describe();

  // Nothing stored before changed; every snapshot restores.
  std::map<std::string, std::string> now = StoredData(store());
  for (const auto& [path, hash] : before_) EXPECT_EQ(now[path], hash) << path;
  for (int t : {2, 3, 4}) {
    const std::string out = Path("out" + std::to_string(t) + ".raw");
    r = OnStore("restore", {Snap("vm/100", t), "disk0.img", out});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(Path("a.raw"), out), "") << t;
  }
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(IoErrorCliTest, BackupWritesAGoodCopyOverAnUnreadableChunk) {
  const std::string& id = ids_[0];
  const std::string chunk_path = ChunkFiles(store()).at(id);
  struct stat st {};
  ASSERT_EQ(::stat(chunk_path.c_str(), &st), 0);
  const ino_t old_inode = st.st_ino;
  // verify finds it unreadable: the snapshot fails, so the next backup does
  // not take it as its dedup base and meets the chunk in the store.
  RunResult r = WithEio(id, "verify", {});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  r = WithEio(id, "backup",
              {"--id", "vm/100", "--time", SnapTime(2), "disk0.img=" + Path("a.raw")});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  ASSERT_EQ(::stat(chunk_path.c_str(), &st), 0);
  EXPECT_NE(st.st_ino, old_inode) << "the unreadable chunk was not replaced";
  EXPECT_EQ(ReadFile(chunk_path).size(), FileSize(chunk_path));

  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  for (int t : {1, 2}) {
    const std::string out = Path("out" + std::to_string(t) + ".raw");
    r = OnStore("restore", {Snap("vm/100", t), "disk0.img", out});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(Path("a.raw"), out), "") << t;
  }
}

TEST_F(IoErrorCliTest, ServerWithAnUnreadableChunkAnswersAClearErrorAndStaysUp) {
  const std::string state = Path("state");
  RunResult t = Cairn({"token", "create", "reader1", "--state-dir", state, "--store", "main",
                       "--role", "reader"});
  ASSERT_EQ(t.exit_code, kExitOk) << t.Describe();
  const std::string token = t.out.substr(0, t.out.find('\n'));
  t = Cairn({"token", "create", "verifier1", "--state-dir", state, "--store", "main", "--role",
             "verify"});
  ASSERT_EQ(t.exit_code, kExitOk) << t.Describe();
  const std::string verifier = t.out.substr(0, t.out.find('\n'));
  const std::string& id = ids_[1];
  // ServerProcess passes the test's environment on to the server: set the
  // hook for its start only.
  ::setenv(kEioVariable, id.c_str(), 1);
  ServerProcess server({"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                        "--state-dir", state},
                       Path("server.err"));
  ::unsetenv(kEioVariable);
  ASSERT_GT(server.port(), 0);
  const std::string host = "127.0.0.1:" + std::to_string(server.port());
  const std::string url = "https://" + host + "/main";
  // A client with its own cache, as `who`.
  auto as = [&](const std::string& who) {
    RunOptions o;
    o.env = {"CAIRN_CACHE_DIR=" + Path("cache"), "CAIRN_TRUSTED_SERVERS=" + Path("servers"),
             "CAIRN_TOKEN=" + who, "CAIRN_FINGERPRINT=" + server.fingerprint()};
    return o;
  };
  const RunOptions client = as(token);

  RunResult r = RunCairn({"restore", "-r", url, snap_, "disk0.img", Path("restored.raw")}, client);
  EXPECT_FALSE(r.killed()) << r.Describe();
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_TRUE(Contains(r.err, host)) << r.Describe();
  EXPECT_TRUE(Contains(r.err, id)) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "Input/output error")) << r.Describe();
  EXPECT_FALSE(Exists(Path("restored.raw")));

  // The server stays up and serves what it can read.
  EXPECT_TRUE(server.alive()) << ReadFile(Path("server.err"));
  r = RunCairn({"restore", "-r", url, snap_, "root.tree", Path("restored-tree")}, client);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("tree/big.bin"), Path("restored-tree/big.bin")), "");
  r = RunCairn({"verify", "-r", url, snap_}, client);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_TRUE(Contains(r.out + r.err, id)) << r.Describe();
  // The server's own verify task finds it too, and leaves it in place (the
  // store is compared below).
  r = RunCairn({"verify", "-r", url, "--on-server"}, as(verifier));
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_TRUE(Contains(r.out + r.err, id)) << r.Describe();
  EXPECT_TRUE(Contains(r.out + r.err, "not quarantined")) << r.Describe();
  EXPECT_TRUE(server.alive()) << ReadFile(Path("server.err"));
  EXPECT_EQ(server.Stop(), 0) << ReadFile(Path("server.err"));

  ExpectIntactWithoutTheFault();
}

}  // namespace
}  // namespace cairn::cli_test
