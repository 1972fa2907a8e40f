// `cairn serve` and the remote client end to end: a real server process on
// loopback (TLS, self-signed certificate made at first start, tokens made
// with `cairn token create`), and the real client running restore, verify,
// snapshots, ls and cat against https://127.0.0.1:PORT/STORE.
//
// What must hold (docs/SERVER.md):
//   - a remote restore (one archive, and --all) is byte-identical to the
//     source, and so are ls and cat of a tree archive; its --json reports
//     the connections used;
//   - remote verify finds a chunk corrupted on the server (exit 3), naming
//     it, and does not move anything on the server;
//   - --jobs N pins the reads in flight of a remote restore and verify, and
//     the connections follow them (one for one read, at most N/8 rounded
//     up, never past the cap), as their --json reports;
//   - a server whose fingerprint the client was not given is refused, with
//     its fingerprint in the message; a wrong fingerprint too; the trusted
//     servers file works;
//   - no token → 401, a bad secret → 401, another datastore → 403, a
//     backup token reading chunks → 403; each with a message saying so;
//   - snapshots forgotten on the server leave the client's mirror;
//   - init is refused on a server (maintenance works: cli_server_admin_test.cc);
//   - the server survives garbage on its port and stops cleanly on SIGTERM.
#include <filesystem>
#include <string>
#include <vector>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

TEST_F(ServerTest, SnapshotsListsWhatTheServerHas) {
  RunResult r = Remote("snapshots", {"--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  std::string text = j.dump();
  EXPECT_NE(text.find(SnapTime(1)), std::string::npos) << text;
  EXPECT_NE(text.find(SnapTime(2)), std::string::npos) << text;
}

TEST_F(ServerTest, RestoreOfAnImageIsByteIdentical) {
  std::string out = Path("restored.img");
  RunResult r = Remote("restore", {Snap("vm/100", 1), "disk0.img", out}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  // Again from the warm mirror, the latest snapshot; the report says how
  // many connections carried the chunks (they follow the reads in flight).
  std::string out2 = Path("restored2.img");
  r = Remote("restore", {"vm/100/latest", "disk0.img", out2, "--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out2), "");
  nlohmann::json j = ParseJson(r.out);
  ASSERT_TRUE(j.contains("connections")) << r.out;
  EXPECT_GE(j["connections"]["max"].get<int>(), 1) << r.out;
  EXPECT_GE(j["connections"]["final"].get<int>(), 1) << r.out;
  EXPECT_LE(j["connections"]["max"].get<int>(), j["connections"]["cap"].get<int>()) << r.out;
  EXPECT_GT(j["connections"]["mean"].get<double>(), 0.0) << r.out;
}

TEST_F(ServerTest, RestoreAllAndTreeReadsAreByteIdentical) {
  std::string dir = Path("all");
  RunResult r = Remote("restore", {Snap("vm/100", 1), "--all", dir}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, dir + "/disk0.img"), "");
  EXPECT_EQ(ReadFile(dir + "/root/etc/app/config"), ReadFile(tree_ + "/etc/app/config"));
  EXPECT_EQ(ReadFile(dir + "/root/README"), ReadFile(tree_ + "/README"));

  r = Remote("ls", {Snap("vm/100", 1), "root.tree", "/etc/app"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("config"), std::string::npos) << r.out;
  r = Remote("cat", {Snap("vm/100", 1), "root.tree", "/README"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, ReadFile(tree_ + "/README"));
}

TEST_F(ServerTest, VerifyFindsCorruptionOnTheServerAndMovesNothing) {
  RunResult r = Remote("verify", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("verified"), std::string::npos) << r.Describe();

  std::vector<std::string> ids = IndexDigests(SnapshotDir(store(), Snap("vm/100", 1)) + "/disk0.img.fidx");
  ASSERT_FALSE(ids.empty());
  std::string victim = ChunkFiles(store()).at(ids[0]);
  FlipBit(victim, FileSize(victim) / 2, 3);
  r = Remote("verify", {}, reader_);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE((r.out + r.err).find(ids[0]), std::string::npos) << r.Describe();
  EXPECT_TRUE(Exists(victim)) << "a client must not quarantine on the server";
  // And a restore that needs it fails as corruption, leaving no target.
  std::string out = Path("bad.img");
  r = Remote("restore", {Snap("vm/100", 1), "disk0.img", out}, reader_);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_FALSE(Exists(out));
}

TEST_F(ServerTest, JobsPinReadsInFlightAndConnectionsFollowThem) {
  RunResult r = Remote("verify", {"--jobs", "1", "--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["jobs"]["mode"], "fixed") << r.out;
  EXPECT_EQ(j["jobs"]["max"], 1) << r.out;
  ASSERT_TRUE(j["connections"].is_object()) << r.out;
  EXPECT_EQ(j["connections"]["max"], 1) << "one read in flight needs one connection: " << r.out;

  r = Remote("restore", {"vm/100/latest", "disk0.img", "--rehearse", "--jobs", "9", "--json"},
             reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  j = ParseJson(r.out);
  EXPECT_EQ(j["jobs"]["mode"], "fixed") << r.out;
  EXPECT_LE(j["jobs"]["max"].get<int>(), 9) << r.out;
  EXPECT_GE(j["connections"]["max"].get<int>(), 1) << r.out;
  EXPECT_LE(j["connections"]["max"].get<int>(), 2) << "9 reads in flight, 8 per connection: " << r.out;
  EXPECT_LE(j["connections"]["cap"].get<int>(), 8) << r.out;

  // Self-tuning: within the cap, and the summary says so.
  r = Remote("verify", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("reads in flight "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connections to the server: "), std::string::npos) << r.out;
}

TEST_F(ServerTest, AnUntrustedServerIsRefusedWithItsFingerprint) {
  RunOptions options;
  options.env = ClientEnv(reader_, /*with_fingerprint=*/false);
  RunResult r = RunCairn({"snapshots", "-r", url_}, options);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(server_->fingerprint()), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("--fingerprint"), std::string::npos) << r.Describe();

  std::string wrong = server_->fingerprint();
  wrong[0] = wrong[0] == 'a' ? 'b' : 'a';
  r = RunCairn({"snapshots", "-r", url_, "--fingerprint", wrong}, options);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(server_->fingerprint()), std::string::npos) << r.Describe();

  // Trusted through the servers file.
  WriteFile(tmp_.Join("servers"), "# trusted\n127.0.0.1:" + std::to_string(server_->port()) + " " +
                                      server_->fingerprint() + "\n");
  r = RunCairn({"snapshots", "-r", url_}, options);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

TEST_F(ServerTest, TokensAreCheckedForEveryRequest) {
  RunResult r = Remote("snapshots", {}, "");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("401"), std::string::npos) << r.Describe();

  std::string bad = reader_.substr(0, reader_.size() - 1) + (reader_.back() == '0' ? "1" : "0");
  r = Remote("snapshots", {}, bad);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("invalid token"), std::string::npos) << r.Describe();

  std::string other = Token("other1", "other", "reader");
  r = Remote("snapshots", {}, other);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("main"), std::string::npos) << r.Describe();

  // A backup token sees only groups it owns (none here) and reads no chunk.
  std::string backup = Token("backup1", "main", "backup");
  r = Remote("snapshots", {"--json"}, backup);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out).dump().find(SnapTime(1)), std::string::npos) << r.out;

  // A revoked token stops working at once (the server re-reads the file).
  ASSERT_EQ(Cairn({"token", "revoke", "reader1", "--state-dir", state_}).exit_code, 0);
  r = Remote("snapshots", {}, reader_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("invalid token"), std::string::npos) << r.Describe();
}

TEST_F(ServerTest, ForgottenSnapshotsLeaveTheMirror) {
  ASSERT_EQ(Remote("snapshots", {}, reader_).exit_code, 0);
  RunResult f = OnStore("forget", {Snap("vm/100", 2)});
  ASSERT_EQ(f.exit_code, 0) << f.Describe();
  RunResult r = Remote("snapshots", {"--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string text = ParseJson(r.out).dump();
  EXPECT_EQ(text.find(SnapTime(2)), std::string::npos) << text;
  EXPECT_NE(text.find(SnapTime(1)), std::string::npos) << text;
}

TEST_F(ServerTest, InitThroughTheServerIsRefused) {
  // (Backup through a server works: cli_server_backup_test.cc; prune, forget,
  // gc and the rest: cli_server_admin_test.cc.)
  // As a client the server trusts and that trusts it: the refusal is init's
  // own, not a certificate or token error before it.
  RunOptions options;
  options.env = ClientEnv(reader_);
  RunResult r = RunCairn({"init", url_}, options);
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find(url_), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("datastores are made on the server"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("cairn serve --store"), std::string::npos) << r.Describe();
  // The server still serves its datastore, unchanged.
  RunResult s = Remote("snapshots", {}, reader_);
  EXPECT_EQ(s.exit_code, kExitOk) << s.Describe();
}

TEST_F(ServerTest, SurvivesGarbageAndStopsCleanly) {
  SendRaw(server_->port(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // plain HTTP on a TLS port
  SendRaw(server_->port(), std::string(100000, '\x16'));
  SendRaw(server_->port(), "");
  EXPECT_TRUE(server_->alive());
  RunResult r = Remote("snapshots", {}, reader_);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(server_->Stop(), 0);
}

TEST_F(ServerTest, AServerGoneMidRestoreIsAClearErrorAndLeavesNoTarget) {
  std::string out = Path("cut.img");
  RunOptions options;
  options.env = ClientEnv(reader_);
  bool stopped = false;
  // Injected latency makes the restore last a few seconds; the server goes
  // away as soon as the restore has started writing its target (a count of
  // polls instead let a slow machine's restore finish first).
  options.poll = [&](pid_t) {
    if (!stopped && Exists(out + ".partial")) {
      server_->Stop();
      stopped = true;
    }
    return false;
  };
  RunResult r = RunCairn({"restore", "-r", url_, Snap("vm/100", 1), "disk0.img", out,
                          "--jobs", "1", "--inject-latency", "300"},
                         options);
  ASSERT_TRUE(stopped) << "the restore never started writing: " << r.Describe();
  EXPECT_NE(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.exit_code, kExitCorruption) << "a server that went away is not corruption";
  EXPECT_NE(r.err.find("127.0.0.1"), std::string::npos) << r.Describe();
  EXPECT_FALSE(Exists(out));
  EXPECT_FALSE(Exists(out + ".partial"));
}

TEST_F(ServerTest, CertShowPrintsTheServersFingerprint) {
  RunResult r = Cairn({"cert", "show", "--state-dir", state_});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find(server_->fingerprint()), std::string::npos) << r.out;
}

}  // namespace
}  // namespace cairn::cli_test
