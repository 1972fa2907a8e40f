// Retention through the real binary: prune with keep rules, forget, protect
// and unprotect, notes; what `cairn snapshots` lists afterwards, that the
// snapshots left restore byte-identical and verify, and that nothing in use
// (a restore's shared lock, a running backup's group lock) is removed.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// A file descriptor with a flock on it, as another process would hold one.
class HeldLock {
 public:
  HeldLock(const std::string& path, int op) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0) << path;
    if (fd_ >= 0) {
      EXPECT_EQ(::flock(fd_, op | LOCK_NB), 0) << path;
    }
  }
  ~HeldLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;

 private:
  int fd_ = -1;
};

class PruneTest : public CliTest {
 protected:
  // Backs up a small image unique to `time` as disk0.img of `id` (in `ns`
  // when given) and remembers the source, for RestoresEqual.
  void BackupAt(const std::string& id, const std::string& time, const std::string& ns = "") {
    const std::string src = Path("src-" + std::to_string(sources_.size()) + ".raw");
    ImageWriter(src, kMiB + 4099 * sources_.size(), 100 + sources_.size())
        .Random(0, 64 * kKiB)
        .Text(kMiB - 64 * kKiB, 64 * kKiB);
    std::vector<std::string> args = {"--id", id, "--time", time, "disk0.img=" + src};
    if (!ns.empty()) args.insert(args.end(), {"--ns", ns});
    RunResult r = OnStore("backup", args);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    sources_[(ns.empty() ? "" : "[" + ns + "] ") + id + "/" + time] = src;
  }

  std::set<std::string> Listed(const std::string& ns = "") const {
    RunResult r = ns.empty() ? OnStore("snapshots", {"--json"})
                             : OnStore("snapshots", {"--json", "--ns", ns});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    std::set<std::string> out;
    nlohmann::json j = ParseJson(r.out);
    if (!j.is_array()) return out;
    for (const auto& s : j) {
      std::string ns_of = s.value("ns", "");
      out.insert((ns_of.empty() ? "" : "[" + ns_of + "] ") + s.value("snapshot", ""));
    }
    return out;
  }

  // The `snapshots --json` entry of `snapshot` (null when not listed).
  nlohmann::json Entry(const std::string& snapshot) const {
    nlohmann::json j = SnapshotsJson();
    if (!j.is_array()) return nullptr;
    for (const auto& s : j) {
      if (s.value("snapshot", "") == snapshot) return s;
    }
    return nullptr;
  }

  // Every listed snapshot (all namespaces) restores to its source.
  void ExpectListedRestoreEqual() {
    for (const std::string& snap : Listed()) {
      SCOPED_TRACE(snap);
      ASSERT_TRUE(sources_.count(snap)) << "listed but never backed up";
      const std::string out = Path("restored-" + std::to_string(restores_++));
      std::vector<std::string> args = {snap, "disk0.img", out};
      if (snap.starts_with("[")) {  // "[ns] vm/100/TIME"
        const size_t close = snap.find("] ");
        args = {"--ns", snap.substr(1, close - 1), snap.substr(close + 2), "disk0.img", out};
      }
      RunResult r = OnStore("restore", args);
      ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
      EXPECT_EQ(CompareFiles(sources_[snap], out), "");
    }
  }

  std::map<std::string, std::string> sources_;  // listed name → source image
  int restores_ = 0;
};

TEST_F(PruneTest, KeepDailyRemovesTheRestAndWhatIsLeftRestoresAndVerifies) {
  for (const char* t : {"2026-01-01T10:00:00Z", "2026-01-01T22:00:00Z", "2026-01-02T10:00:00Z",
                        "2026-01-03T08:00:00Z", "2026-01-03T20:00:00Z"}) {
    BackupAt("vm/100", t);
  }
  RunResult r = OnStore("prune", {"vm/100", "--keep-daily", "2", "--utc", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["dry_run"], false);
  EXPECT_EQ(j["kept"], 2);
  EXPECT_EQ(j["removed"], 3);
  EXPECT_EQ(j["in_use"], 0);
  ASSERT_EQ(j["groups"].size(), 1u);
  const auto& snaps = j["groups"][0]["snapshots"];
  ASSERT_EQ(snaps.size(), 5u);
  EXPECT_EQ(snaps[0]["snapshot"], "vm/100/2026-01-03T20:00:00Z");  // newest first
  EXPECT_EQ(snaps[0]["action"], "keep");
  EXPECT_EQ(snaps[0]["reason"], "daily");
  EXPECT_EQ(snaps[1]["action"], "remove");
  EXPECT_EQ(snaps[2]["snapshot"], "vm/100/2026-01-02T10:00:00Z");
  EXPECT_EQ(snaps[2]["reason"], "daily");
  EXPECT_EQ(Listed(), (std::set<std::string>{"vm/100/2026-01-02T10:00:00Z",
                                             "vm/100/2026-01-03T20:00:00Z"}));
  ExpectListedRestoreEqual();
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(PruneTest, TextOutputShowsEachDecisionAndTheSummary) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  BackupAt("vm/100", "2026-01-02T10:00:00Z");
  RunResult r = OnStore("prune", {"--keep-last", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("vm/100/2026-01-02T10:00:00Z"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("keep    last"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vm/100/2026-01-01T10:00:00Z"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kept 1, removed 1, in use 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cairn gc"), std::string::npos) << r.out;
}

TEST_F(PruneTest, DryRunRemovesNothing) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  BackupAt("vm/100", "2026-01-02T10:00:00Z");
  BackupAt("vm/100", "2026-01-03T10:00:00Z");
  const auto before = Listed();
  RunResult r = OnStore("prune", {"--keep-last", "1", "--dry-run"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("dry run: nothing removed"), std::string::npos) << r.out;
  r = OnStore("prune", {"--keep-last", "1", "--dry-run", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["dry_run"], true);
  EXPECT_EQ(j["removed"], 2);
  EXPECT_EQ(Listed(), before);
  EXPECT_EQ(before.size(), 3u);
}

TEST_F(PruneTest, WithoutKeepOptionIsAUsageError) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  RunResult r = OnStore("prune", {});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("no --keep-* option given"), std::string::npos) << r.err;
  r = OnStore("prune", {"--keep-last", "-1"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_EQ(Listed().size(), 1u);
}

TEST_F(PruneTest, PruneOfAMissingGroupFails) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  RunResult r = OnStore("prune", {"vm/999", "--keep-last", "1"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("vm/999 not found"), std::string::npos) << r.err;
}

TEST_F(PruneTest, ProtectedSnapshotSurvivesPruneAndForget) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  BackupAt("vm/100", "2026-01-02T10:00:00Z");
  BackupAt("vm/100", "2026-01-03T10:00:00Z");
  const std::string old = "vm/100/2026-01-01T10:00:00Z";
  RunResult r = OnStore("protect", {old});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(Exists(SnapshotDir(store(), old) + "/.protected"));
  EXPECT_EQ(Entry(old)["protected"], true);
  EXPECT_EQ(Entry("vm/100/2026-01-03T10:00:00Z")["protected"], false);
  r = OnStore("snapshots", {});
  EXPECT_NE(r.out.find("protected"), std::string::npos) << r.out;

  r = OnStore("prune", {"--keep-last", "1", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["removed"], 1);
  EXPECT_EQ(j["groups"][0]["snapshots"][2]["reason"], "protected");
  EXPECT_EQ(Listed(), (std::set<std::string>{old, "vm/100/2026-01-03T10:00:00Z"}));

  r = OnStore("forget", {old});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find(old + " is protected"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cairn unprotect"), std::string::npos) << r.err;
  EXPECT_TRUE(Listed().count(old));

  r = OnStore("unprotect", {old});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_FALSE(Exists(SnapshotDir(store(), old) + "/.protected"));
  r = OnStore("forget", {old});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("cairn gc"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(SnapshotDir(store(), old)));
  EXPECT_EQ(Listed(), (std::set<std::string>{"vm/100/2026-01-03T10:00:00Z"}));
  ExpectListedRestoreEqual();
}

TEST_F(PruneTest, ForgetErrorsAreClean) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  BackupAt("vm/100", "2026-01-02T10:00:00Z");
  RunResult r = OnStore("forget", {"vm/100/2026-01-01T05:00:00Z"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("not found"), std::string::npos) << r.err;
  r = OnStore("forget", {"vm/100/yesterday"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  r = OnStore("forget", {});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  r = OnStore("protect", {"vm/100/2026-01-01T05:00:00Z"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_FALSE(Exists(SnapshotDir(store(), "vm/100/2026-01-01T05:00:00Z")));
  EXPECT_EQ(Listed().size(), 2u);
  // latest resolves to the newest finished snapshot.
  r = OnStore("forget", {"vm/100/latest", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["snapshot"], "vm/100/2026-01-02T10:00:00Z");
  EXPECT_EQ(Listed(), (std::set<std::string>{"vm/100/2026-01-01T10:00:00Z"}));
  ExpectListedRestoreEqual();
}

TEST_F(PruneTest, ForgetAndPruneLeaveASnapshotInUseAlone) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  BackupAt("vm/100", "2026-01-02T10:00:00Z");
  const std::string old = "vm/100/2026-01-01T10:00:00Z";
  {
    // As a restore reading it (or a backup using it as its base) holds it.
    HeldLock reader(SnapshotDir(store(), old) + "/index.json.blob", LOCK_SH);
    RunResult r = OnStore("forget", {old});
    EXPECT_EQ(r.exit_code, kExitLocked) << r.Describe();
    EXPECT_NE(r.err.find("in use"), std::string::npos) << r.err;
    r = OnStore("prune", {"--keep-last", "1", "--json"});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    nlohmann::json j = ParseJson(r.out);
    EXPECT_EQ(j["in_use"], 1);
    EXPECT_EQ(j["removed"], 0);
    EXPECT_EQ(j["groups"][0]["snapshots"][1]["action"], "in-use");
    EXPECT_EQ(Listed().size(), 2u);
  }
  ExpectListedRestoreEqual();
  RunResult r = OnStore("forget", {old});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(Listed().size(), 1u);
}

TEST_F(PruneTest, NotesSetShowClear) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  const std::string snap = "vm/100/2026-01-01T10:00:00Z";
  RunResult r = OnStore("notes", {snap});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.out, "");
  r = OnStore("notes", {snap, "--set", "before the upgrade to 9.1\nsecond line"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = OnStore("notes", {snap});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.out, "before the upgrade to 9.1\nsecond line\n");
  r = OnStore("notes", {"vm/100/latest", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["notes"], "before the upgrade to 9.1\nsecond line");
  EXPECT_EQ(Entry(snap)["notes"], "before the upgrade to 9.1\nsecond line");
  r = OnStore("snapshots", {});
  EXPECT_NE(r.out.find("before the upgrade to 9.1"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("second line"), std::string::npos) << "only the first line: " << r.out;

  WriteFile(Path("notes.txt"), "from a file\n");
  r = OnStore("notes", {snap, "--file", Path("notes.txt")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(Entry(snap)["notes"], "from a file\n");

  WriteFile(Path("big.txt"), std::string(64 * 1024 + 1, 'x'));
  r = OnStore("notes", {snap, "--file", Path("big.txt")});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_EQ(Entry(snap)["notes"], "from a file\n");  // unchanged
  r = OnStore("notes", {snap, "--set", "x", "--file", Path("notes.txt")});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  r = OnStore("notes", {"vm/100/2026-01-09T00:00:00Z", "--set", "x"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();

  r = OnStore("notes", {snap, "--set", ""});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(Entry(snap)["notes"], "");
  EXPECT_FALSE(Exists(SnapshotDir(store(), snap) + "/notes.txt"));
  // Notes and the flag do not disturb restore or verify.
  ASSERT_EQ(OnStore("protect", {snap}).exit_code, kExitOk);
  ASSERT_EQ(OnStore("notes", {snap, "--set", "kept"}).exit_code, kExitOk);
  ExpectListedRestoreEqual();
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(PruneTest, UnfinishedDirectoryIsRemovedUnlessABackupRuns) {
  BackupAt("vm/100", "2026-01-01T10:00:00Z");
  const std::string unfinished = SnapshotDir(store(), "vm/100/2026-01-05T00:00:00Z");
  ASSERT_EQ(::mkdir(unfinished.c_str(), 0755), 0);
  WriteFile(unfinished + "/disk0.img.fidx", "partial");
  {
    // A backup of the group is running: its directory has no manifest yet.
    HeldLock backup(store() + "/vm/100/.lock", LOCK_EX);
    RunResult r = OnStore("prune", {"--keep-last", "5"});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_TRUE(Exists(unfinished));
    EXPECT_NE(r.out.find("a backup of the group is running"), std::string::npos) << r.out;
  }
  RunResult r = OnStore("prune", {"--keep-last", "5", "--dry-run"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("unfinished"), std::string::npos) << r.out;
  EXPECT_TRUE(Exists(unfinished));
  r = OnStore("prune", {"--keep-last", "5", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["unfinished_removed"], 1);
  EXPECT_EQ(j["groups"][0]["unfinished"][0]["name"], "2026-01-05T00:00:00Z");
  EXPECT_FALSE(Exists(unfinished));
  EXPECT_EQ(Listed().size(), 1u);
  ExpectListedRestoreEqual();
}

TEST_F(PruneTest, GroupNamespaceAndWholeNamespace) {
  for (const char* t : {"2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z"}) {
    BackupAt("vm/100", t);
    BackupAt("vm/200", t);
    BackupAt("vm/100", t, "site1");
  }
  RunResult r = OnStore("prune", {"vm/100", "--keep-last", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(Listed(), (std::set<std::string>{"vm/100/2026-01-02T10:00:00Z",
                                             "vm/200/2026-01-01T10:00:00Z",
                                             "vm/200/2026-01-02T10:00:00Z",
                                             "[site1] vm/100/2026-01-01T10:00:00Z",
                                             "[site1] vm/100/2026-01-02T10:00:00Z"}));
  r = OnStore("prune", {"--keep-last", "1"});  // every group of the root namespace
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(Listed("site1").size(), 2u);
  EXPECT_EQ(Listed().size(), 4u);
  r = OnStore("prune", {"--ns", "site1", "--keep-last", "1", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["ns"], "site1");
  EXPECT_EQ(j["removed"], 1);
  EXPECT_EQ(Listed(), (std::set<std::string>{"vm/100/2026-01-02T10:00:00Z",
                                             "vm/200/2026-01-02T10:00:00Z",
                                             "[site1] vm/100/2026-01-02T10:00:00Z"}));
  // A snapshot in a namespace is named with --ns, and so are the commands.
  r = OnStore("protect", {"--ns", "site1", "vm/100/latest"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = OnStore("forget", {"--ns", "site1", "vm/100/2026-01-02T10:00:00Z"});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("--ns site1"), std::string::npos) << r.err;
  ExpectListedRestoreEqual();
}

}  // namespace
}  // namespace cairn::cli_test
