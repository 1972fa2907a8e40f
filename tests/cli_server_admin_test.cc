// Maintenance through `cairn serve` (docs/SERVER.md, "Maintenance through the
// server"), with the real binary on both sides:
//   - status, prune (dry run, then for real), forget, protect / unprotect,
//     notes and gc run through the server print what the same command prints
//     on the server's datastore path, and change the datastore the same way;
//   - gc is a server task: it frees the space of what prune and forget
//     removed, and the datastore verifies clean afterwards;
//   - only admin tokens may delete (forget, prune, protect, gc): reader,
//     backup and verify tokens get 403 naming the token, role and action;
//     status works for every role; a backup token may set the notes of its
//     own groups only.
// The data is tiny (three snapshots of a 256 KiB tree) so the file stays fast.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

constexpr uint64_t kFileSize = 256 << 10;

class ServerAdminTest : public ServerTest {
 protected:
  // Not ServerTest::SetUp: its 40 MiB image is more than these tests need.
  void SetUp() override {
    CliTest::SetUp();
    state_ = Path("state");
    reader_ = Token("reader1", "main", "reader");
    admin_ = Token("ops", "main", "admin");
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--store", "main=" + store(),
                                 "--state-dir", state_},
        Path("server.err"));
    ASSERT_GT(server_->port(), 0);
    url_ = "https://127.0.0.1:" + std::to_string(server_->port()) + "/main";
    for (int i = 0; i < 3; ++i) BackupThroughServer("host/web1", 10 + i, admin_);
  }

  // A backup of a tree holding one file of random bytes (its own chunks)
  // through the server, as `token`.
  void BackupThroughServer(const std::string& id, int t, const std::string& token) {
    std::string tree = Path("tree" + std::to_string(t));
    std::filesystem::create_directories(tree);
    ImageWriter(tree + "/data", kFileSize, 100 + t).Random(0, kFileSize);
    RunResult r = Remote("backup", {"--id", id, "--time", SnapTime(t), "root.tree=" + tree}, token);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
  }

  // `cairn VERB ARGS…` on the server's datastore path, for comparison.
  RunResult Local(const std::string& verb, std::vector<std::string> args) const {
    return OnStore(verb, std::move(args));
  }

  std::string admin_;
};

TEST_F(ServerAdminTest, StatusPruneForgetProtectNotesAndGcThroughTheServer) {
  // status: the local command's output, but for the datastore line.
  RunResult r = Remote("status", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("datastore   " + url_ + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("snapshots   3 in 1 groups\n"), std::string::npos) << r.out;
  nlohmann::json remote = ParseJson(Remote("status", {"--json"}, reader_).out);
  nlohmann::json local = ParseJson(Local("status", {"--json"}).out);
  for (const char* key : {"snapshots", "groups", "chunks", "chunk_bytes", "logical_bytes"}) {
    EXPECT_EQ(remote[key], local[key]) << key;
  }

  // prune --dry-run: exactly the local dry run's output; nothing removed.
  const std::vector<std::string> prune = {"host/web1", "--keep-last", "1", "--dry-run"};
  r = Remote("prune", prune, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, Local("prune", prune).out);
  EXPECT_NE(r.out.find("would keep 1, would remove 2; dry run: nothing removed"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(ListedSnapshots().size(), 3u);

  // prune for real: two go, in the local --json shape.
  r = Remote("prune", {"--keep-last", "1", "--json"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["dry_run"], false);
  EXPECT_EQ(j["kept"], 1);
  EXPECT_EQ(j["removed"], 2);
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["group"], "host/web1");
  EXPECT_EQ(j["groups"][0]["snapshots"][0]["action"], "keep");
  EXPECT_EQ(j["groups"][0]["snapshots"][0]["reason"], "last");
  EXPECT_EQ(j["groups"][0]["snapshots"][1]["action"], "remove");
  r = Remote("snapshots", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find(SnapTime(12)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(SnapTime(10)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(SnapTime(11)), std::string::npos) << r.out;

  // protect, then forget is refused (as locally: exit 1); unprotect.
  BackupThroughServer("host/web1", 13, admin_);
  r = Remote("protect", {"host/web1/latest"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "protected " + Snap("host/web1", 13) + "\n");
  // A client's listing shows the flag, as a local one does (it read false).
  auto listed = [&](const std::string& snap) {
    RunResult l = Remote("snapshots", {"host/web1", "--json"}, reader_);
    EXPECT_EQ(l.exit_code, 0) << l.Describe();
    for (const auto& e : ParseJson(l.out)) {
      if (e["snapshot"] == snap) return e;
    }
    ADD_FAILURE() << snap << " not listed: " << l.out;
    return nlohmann::json();
  };
  EXPECT_EQ(listed(Snap("host/web1", 13))["protected"], true);
  r = Remote("forget", {Snap("host/web1", 13)}, admin_);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("protected"), std::string::npos) << r.Describe();
  // The server's path of the datastore stays on the server.
  EXPECT_EQ(r.err.find(store()), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("cairn unprotect -r https://…/main"), std::string::npos) << r.Describe();
  r = Remote("unprotect", {Snap("host/web1", 13), "--json"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["protected"], false);
  EXPECT_EQ(listed(Snap("host/web1", 13))["protected"], false);

  // notes: set, then read back.
  r = Remote("notes", {Snap("host/web1", 12), "--set", "before the upgrade"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "notes of " + Snap("host/web1", 12) + " set (18 bytes)\n");
  r = Remote("notes", {Snap("host/web1", 12)}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "before the upgrade\n");
  EXPECT_EQ(Local("notes", {Snap("host/web1", 12)}).out, "before the upgrade\n");
  EXPECT_EQ(listed(Snap("host/web1", 12))["notes"], "before the upgrade");

  // forget.
  r = Remote("forget", {Snap("host/web1", 13)}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, "forgot " + Snap("host/web1", 13) + "; run `cairn gc` to free space\n");
  r = Remote("forget", {Snap("host/web1", 13)}, admin_);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.Describe();
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{Snap("host/web1", 12)});

  // gc as a task on the server frees the space; the store verifies clean.
  const size_t chunks_before = ChunkFiles(store()).size();
  r = Remote("gc", {"--grace", "0"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("marked "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nremoved "), std::string::npos) << r.out;
  // The server's gc task names its bottleneck, printed last as a local gc's.
  EXPECT_NE(r.out.find("\nbottleneck: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1).rfind("bottleneck: ", 0), 0u)
      << r.out;
  EXPECT_LT(ChunkFiles(store()).size(), chunks_before);
  r = Local("verify", {});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // A second one, detached and followed: nothing left to remove.
  r = Remote("gc", {"--grace", "0", "--detach"}, admin_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  std::string id = r.out.substr(0, r.out.find('\n'));
  ASSERT_EQ(id.size(), 32u) << r.out;
  RunOptions options;
  options.env = ClientEnv(admin_);
  r = RunCairn({"task", "show", "-r", url_, id, "--follow", "--json"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  j = ParseJson(r.out);
  EXPECT_EQ(j["kind"], "gc");
  EXPECT_EQ(j["state"], "ok");
  EXPECT_EQ(j["report"]["removed_chunks"], 0);
  r = Remote("status", {}, admin_);
  EXPECT_NE(r.out.find("gc          last "), std::string::npos) << r.out;
}

TEST_F(ServerAdminTest, OnlyAdminMayDeleteAndBackupTokensSetNotesOfTheirOwnGroups) {
  const std::string backup = Token("bk1", "main", "backup");
  const std::string verifier = Token("verifier1", "main", "verify");
  BackupThroughServer("host/db1", 20, backup);
  const std::string snap = Snap("host/db1", 20);
  const struct {
    std::string token, name, role;
  } refused[] = {{reader_, "reader1", "reader"}, {backup, "bk1", "backup"},
                 {verifier, "verifier1", "verify"}};
  for (const auto& t : refused) {
    SCOPED_TRACE(t.role);
    const std::string who = "token '" + t.name + "' (role " + t.role + ") may not ";
    RunResult r = Remote("forget", {snap}, t.token);
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_NE(r.err.find("403"), std::string::npos) << r.Describe();
    EXPECT_NE(r.err.find(who + "forget snapshots"), std::string::npos) << r.Describe();
    r = Remote("prune", {"--keep-last", "1"}, t.token);
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_NE(r.err.find(who + "prune snapshots"), std::string::npos) << r.Describe();
    r = Remote("protect", {snap}, t.token);
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_NE(r.err.find(who + "protect"), std::string::npos) << r.Describe();
    r = Remote("gc", {}, t.token);
    EXPECT_EQ(r.exit_code, 1) << r.Describe();
    EXPECT_NE(r.err.find(who + "start a gc"), std::string::npos) << r.Describe();
    // Store-wide counts tell of every host's backups: not a backup token's.
    r = Remote("status", {"--json"}, t.token);
    if (t.role == "backup") {
      EXPECT_EQ(r.exit_code, 1) << r.Describe();
      EXPECT_NE(r.err.find(who + "read the status"), std::string::npos) << r.Describe();
    } else {
      EXPECT_EQ(r.exit_code, 0) << r.Describe();
    }
  }
  EXPECT_EQ(ListedSnapshots().size(), 4u);

  // Notes: a backup token on its own group, not on another; a reader reads.
  RunResult r = Remote("notes", {snap, "--set", "db"}, backup);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  // Another token's group is, to a backup token, a group that does not exist.
  r = Remote("notes", {"host/web1/latest", "--set", "x"}, backup);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("no snapshot host/web1/latest among the groups of token 'bk1'"),
            std::string::npos)
      << r.Describe();
  r = Remote("notes", {snap, "--set", "x"}, reader_);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("may not set notes"), std::string::npos) << r.Describe();
  r = Remote("notes", {snap, "--json"}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["notes"], "db");

  // A token of another datastore learns nothing: 403 as for every route.
  r = Remote("status", {}, Token("elsewhere", "other", "admin"));
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("has no access to datastore 'main'"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
