// Kill -9 during a backup through `cairn serve` (issue 29): the client
// killed at seeded socket writes, and the server killed at seeded file
// events, both with cairn-killpoint (tests/cli_kill.h). After each kill the
// store on the server lists only finished snapshots, verifies clean, every
// listed snapshot restores byte for byte, and the same backup run again
// through the server completes at once: a killed client's session does not
// keep the group locked (server/backup_session.h, "orphaned").
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli_kill_fixture.h"
#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class ServerKillTest : public KillFixture<ServerTest> {
 protected:
  void SetUp() override {
    KillFixture<ServerTest>::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    backup_token_ = Token("backup1", "main", "backup");
  }

  std::vector<std::string> BackupArgs(int t) const {
    return {"backup", "-r", url_, "--id", "host/web", "--time", SnapTime(t),
            "root.tree=" + tree_};
  }
  // The client's backup through the server, optionally under
  // cairn-killpoint (`options.wrapper`).
  RunResult RemoteBackup(int t, RunOptions options = {}) const {
    std::vector<std::string> env = ClientEnv(backup_token_);
    options.env.insert(options.env.end(), env.begin(), env.end());
    return RunCairn(BackupArgs(t), options);
  }

  // (Re)starts the server, optionally under cairn-killpoint.
  void StartServer(const std::vector<std::string>& wrapper = {}) {
    server_.reset();
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store",
                                 "main=" + store(), "--state-dir", state_},
        Path("server.err"), wrapper);
    ASSERT_GT(server_->port(), 0) << ReadFile(Path("server.err"));
    url_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/main";
  }

  std::string backup_token_;
};

TEST_F(ServerKillTest, ClientKilledMidBackup) {
  const std::string report = Path("client.report");
  // A clean run counts the client's socket writes.
  RunResult r = RemoteBackup(10, KillAt(0, report, "net"));
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  Freeze(Snap("host/web", 10));
  const uint64_t events = ReadKillReport(report).events;
  ASSERT_GT(events, 0u);

  std::set<std::string> finished = {Snap("host/web", 10)};
  const uint64_t seed = KillSeed(2921);
  const std::vector<uint64_t> points = KillPoints(events, KillPointCount(kCiKillPoints), seed);
  int killed = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    SCOPED_TRACE("CAIRN_KILL_SEED=" + std::to_string(seed) + ", point " +
                 std::to_string(points[i]) + " of " + std::to_string(events));
    WriteSourceTree(static_cast<int>(i) + 1);  // new chunks to upload
    const int t = 20 + static_cast<int>(i);
    const std::string snap = Snap("host/web", t);
    Freeze(snap);
    r = RemoteBackup(t, KillAt(points[i], report, "net"));
    if (!r.killed()) {
      EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
      finished.insert(snap);
      continue;
    }
    ++killed;
    CheckStore(finished, {snap});
    // The same backup again, at once: the killed client's session must not
    // hold the group (it did for 15 minutes: the session timeout).
    if (!Listed().count(snap)) {
      RunResult again = RemoteBackup(t);
      ASSERT_EQ(again.exit_code, kExitOk)
          << again.Describe() << "\nserver log:\n" << ReadFile(Path("server.err"));
    }
    finished.insert(snap);
    CheckStore(finished, {});
    EXPECT_EQ(SnapshotFiles(snap),
              (std::vector<std::string>{"index.json.blob", "root.tree.data.didx",
                                        "root.tree.meta.didx"}))
        << "leftovers of the killed session";
    if (HasFailure()) return;
  }
  EXPECT_GE(killed, MinimumKills(static_cast<int>(points.size())))
      << killed << " of " << points.size() << " points landed inside the backup";
}

TEST_F(ServerKillTest, ServerKilledMidBackup) {
  // How many file events the server has with no backup (start and stop),
  // and with one: the kill points fall in between.
  const std::string report = Path("server.report");
  StartServer(KillAt(0, report).wrapper);
  ASSERT_EQ(server_->Stop(), 0);
  const uint64_t idle_events = ReadKillReport(report).events;
  StartServer(KillAt(0, report).wrapper);
  RunResult r = RemoteBackup(10);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  Freeze(Snap("host/web", 10));
  ASSERT_EQ(server_->Stop(), 0);
  const uint64_t busy_events = ReadKillReport(report).events;
  ASSERT_GT(busy_events, idle_events);

  std::set<std::string> finished = {Snap("host/web", 10)};
  const uint64_t seed = KillSeed(2922);
  const std::vector<uint64_t> points =
      KillPoints(busy_events - idle_events, KillPointCount(kCiKillPoints), seed);
  int killed = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const uint64_t at = idle_events + points[i];
    SCOPED_TRACE("CAIRN_KILL_SEED=" + std::to_string(seed) + ", server event " +
                 std::to_string(at) + " of " + std::to_string(busy_events));
    WriteSourceTree(static_cast<int>(i) + 1);
    const int t = 20 + static_cast<int>(i);
    const std::string snap = Snap("host/web", t);
    Freeze(snap);
    StartServer(KillAt(at, report).wrapper);
    r = RemoteBackup(t);
    if (!server_->Ended()) {
      // The backup had fewer events than counted: it finished.
      EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
      finished.insert(snap);
      continue;
    }
    ++killed;
    EXPECT_NE(r.exit_code, kExitOk) << "the client did not notice the server's death";
    CheckStore(finished, {snap});
    // A new server; the backup run again completes.
    StartServer();
    if (!Listed().count(snap)) {
      RunResult again = RemoteBackup(t);
      ASSERT_EQ(again.exit_code, kExitOk)
          << again.Describe() << "\nserver log:\n" << ReadFile(Path("server.err"));
    }
    finished.insert(snap);
    CheckStore(finished, {});
    if (HasFailure()) return;
  }
  EXPECT_GE(killed, MinimumKills(static_cast<int>(points.size())))
      << killed << " of " << points.size() << " points landed inside the backup";
}

}  // namespace
}  // namespace cairn::cli_test
