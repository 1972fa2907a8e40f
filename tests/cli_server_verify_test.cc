// Server-side verify (docs/SERVER.md, "Server-side verify and tasks"): the
// real client runs `verify --on-server` against a real `cairn serve`:
//   - a verify token verifies a clean store on the server: exit 0, and the
//     snapshots' verify state on the server becomes ok;
//   - a chunk corrupted on the server is found (exit 3, the chunk named) and
//     quarantined there (moved to .bad), unlike a client-side remote verify;
//   - `task show` (status, --log, --follow), `--detach`;
//   - a reader token may not start one (403); another token cannot see the
//     task (404); an admin token can;
//   - a verify run on a client (without --on-server) records on the client
//     only, whatever its token: the server's verify state and ledger stay
//     as they were, the client's mirror does not claim a state the server
//     lacks, and --json says where it recorded and how many connections
//     carried the chunks; --on-server afterwards records on the server.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class ServerVerifyTaskTest : public ServerTest {
 protected:
  void SetUp() override {
    ServerTest::SetUp();
    verifier_ = Token("verifier1", "main", "verify");
  }

  // The verify state of every snapshot of the server's store, as
  // `snapshots --json` on the store's path shows it.
  std::vector<std::string> VerifyStates() {
    std::vector<std::string> states;
    nlohmann::json j = SnapshotsJson();
    if (!j.is_array()) return states;
    for (const auto& s : j) {
      states.push_back(s["verify"].is_object() ? s["verify"]["state"].get<std::string>() : "none");
    }
    return states;
  }

  // `verify --on-server --detach` as `token`: the task id.
  std::string Detach(const std::string& token) {
    RunResult r = Remote("verify", {"--on-server", "--detach"}, token);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    std::string id = r.out.substr(0, r.out.find('\n'));
    EXPECT_EQ(id.size(), 32u) << r.Describe();
    return id;
  }

  std::string verifier_;
};

TEST_F(ServerVerifyTaskTest, CleanStoreIsVerifiedOnTheServerAndItsStateRecorded) {
  EXPECT_EQ(VerifyStates(), (std::vector<std::string>{"none", "none"}));
  RunResult r = Remote("verify", {"--on-server"}, verifier_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("2 snapshots: all ok"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("verified "), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("(0 errors)"), std::string::npos) << r.Describe();
  EXPECT_EQ(VerifyStates(), (std::vector<std::string>{"ok", "ok"}));
  // The task is on disk in the state directory.
  EXPECT_EQ(ListDir(state_ + "/tasks").size(), 2u);  // ID.json, ID.log

  // A scope: one group's latest snapshot.
  r = Remote("verify", {"--on-server", "vm/100/latest"}, verifier_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.Describe();
  // A scope that does not exist is refused at once.
  r = Remote("verify", {"--on-server", "vm/999"}, verifier_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("vm/999"), std::string::npos) << r.Describe();
}

TEST_F(ServerVerifyTaskTest, CorruptChunkIsFoundAndQuarantinedOnTheServer) {
  std::vector<std::string> ids =
      IndexDigests(SnapshotDir(store(), Snap("vm/100", 1)) + "/disk0.img.fidx");
  ASSERT_FALSE(ids.empty());
  std::string victim = ChunkFiles(store()).at(ids[0]);
  FlipBit(victim, FileSize(victim) / 2, 3);
  RunResult r = Remote("verify", {"--on-server"}, verifier_);
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.out.find("BAD chunk " + ids[0]), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("needed by vm/100/"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("snapshots FAILED"), std::string::npos) << r.Describe();
  EXPECT_FALSE(Exists(victim)) << "the server's verify quarantines the chunk";
  EXPECT_TRUE(Exists(victim + ".bad"));
  std::vector<std::string> states = VerifyStates();
  EXPECT_NE(std::find(states.begin(), states.end(), "failed"), states.end());
}

TEST_F(ServerVerifyTaskTest, DetachThenTaskShowFollowAndLog) {
  std::string id = Detach(verifier_);
  ASSERT_EQ(id.size(), 32u);
  RunResult r = Remote("task", {}, verifier_);  // needs a verb
  EXPECT_NE(r.exit_code, 0);
  RunOptions options;
  options.env = ClientEnv(verifier_);
  r = RunCairn({"task", "show", "-r", url_, id, "--follow"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("2 snapshots: all ok"), std::string::npos) << r.Describe();
  r = RunCairn({"task", "show", "-r", url_, id}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("state     ok"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("token     verifier1"), std::string::npos) << r.Describe();
  r = RunCairn({"task", "show", "-r", url_, id, "--log"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("started by token 'verifier1'"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("verify ended: ok"), std::string::npos) << r.Describe();
  r = RunCairn({"task", "show", "-r", url_, id, "--json"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["id"], id);
  EXPECT_EQ(j["state"], "ok");
  EXPECT_EQ(j["store"], "main");
  EXPECT_EQ(j["problems"], 0);
  r = RunCairn({"task", "list", "-r", url_, "--json"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["tasks"].size(), 1u) << r.out;
}

TEST_F(ServerVerifyTaskTest, AClientVerifyRecordsOnTheClientOnlyWhateverItsToken) {
  // The verify state of every snapshot as the client sees the server's.
  auto remote_states = [&] {
    std::vector<std::string> states;
    RunResult r = Remote("snapshots", {"--json"}, reader_);
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    for (const auto& s : ParseJson(r.out)) {
      states.push_back(s["verify"].is_object() ? s["verify"]["state"].get<std::string>() : "none");
    }
    return states;
  };
  const std::string cache = tmp_.Join("cache");
  for (const std::string& token : {reader_, verifier_}) {
    RunResult r = Remote("verify", {"--json"}, token);
    ASSERT_EQ(r.exit_code, 0) << r.Describe();
    nlohmann::json j = ParseJson(r.out);
    EXPECT_EQ(j["snapshots"].size(), 2u) << r.out;
    EXPECT_GT(j["checked_chunks"].get<int>(), 0) << r.out;
    ASSERT_TRUE(j["recorded"].is_object()) << r.out;
    EXPECT_EQ(j["recorded"]["where"], "client") << r.out;
    EXPECT_EQ(j["recorded"]["on_server"], false) << r.out;
    EXPECT_EQ(j["recorded"]["snapshot_state"], false) << r.out;
    std::string ledger = j["recorded"]["ledger"].get<std::string>();
    EXPECT_EQ(ledger.rfind(cache + "/", 0), 0u) << "the ledger is in the client's cache: " << r.out;
    EXPECT_TRUE(Exists(ledger)) << ledger;
    ASSERT_TRUE(j["connections"].is_object()) << r.out;
    EXPECT_GE(j["connections"]["max"].get<int>(), 1) << r.out;
    EXPECT_LE(j["connections"]["max"].get<int>(), j["connections"]["cap"].get<int>()) << r.out;
    // Nothing recorded on the server, nor claimed for it by the mirror.
    EXPECT_EQ(VerifyStates(), (std::vector<std::string>{"none", "none"}));
    EXPECT_FALSE(Exists(store() + "/.ledger"));
    EXPECT_EQ(remote_states(), (std::vector<std::string>{"none", "none"}));
  }
  RunResult r = Remote("verify", {}, reader_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("recorded on this client only"), std::string::npos) << r.out;

  // The server's own verify records there, and its record reaches the client.
  r = Remote("verify", {"--on-server"}, verifier_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(VerifyStates(), (std::vector<std::string>{"ok", "ok"}));
  EXPECT_EQ(remote_states(), (std::vector<std::string>{"ok", "ok"}));
  // A verify at the datastore's path records in it, and says so.
  r = OnStore("verify", {"--json"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  EXPECT_EQ(j["recorded"]["where"], "datastore") << r.out;
  EXPECT_EQ(j["recorded"]["snapshot_state"], true) << r.out;
  EXPECT_EQ(j["recorded"]["ledger"], store() + "/.ledger") << r.out;
  EXPECT_TRUE(j["connections"].is_null()) << r.out;
}

TEST_F(ServerVerifyTaskTest, ReaderIsRefusedAndOthersCannotSeeTheTask) {
  RunResult r = Remote("verify", {"--on-server"}, reader_);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("403"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("role verify or admin"), std::string::npos) << r.Describe();

  std::string id = Detach(verifier_);
  ASSERT_EQ(id.size(), 32u);
  std::string other = Token("verifier2", "main", "verify");
  RunOptions options;
  options.env = ClientEnv(other);
  r = RunCairn({"task", "show", "-r", url_, id}, options);
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.Describe();
  options.env = ClientEnv(reader_);
  r = RunCairn({"task", "show", "-r", url_, id}, options);
  EXPECT_NE(r.err.find("404"), std::string::npos) << r.Describe();
  r = RunCairn({"task", "list", "-r", url_, "--json"}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_TRUE(ParseJson(r.out)["tasks"].empty()) << r.out;
  // An admin token sees it.
  options.env = ClientEnv(Token("ops", "*", "admin"));
  r = RunCairn({"task", "show", "-r", url_, id, "--follow"}, options);
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test
