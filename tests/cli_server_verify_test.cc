// Server-side verify (docs/SERVER.md, "Server-side verify and tasks"): the
// real client runs `verify --on-server` against a real `cairn serve`:
//   - a verify token verifies a clean store on the server: exit 0, and the
//     snapshots' verify state on the server becomes ok;
//   - a chunk corrupted on the server is found (exit 3, the chunk named) and
//     quarantined there (moved to .bad), unlike a client-side remote verify;
//   - `task show` (status, --log, --follow), `--detach`;
//   - a reader token may not start one (403); another token cannot see the
//     task (404); an admin token can.
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
