// Sync jobs of `cairn serve` (server/sync_jobs.h, docs/SERVER.md "Sync
// jobs") with the real binary: a second server pulls from the first (a
// server source with a reader token and a pinned fingerprint) and from a
// path (into a mapped namespace), each run started through the API by an
// admin token (`cairn sync-job run`), a server task whose log and result
// `cairn task` and `cairn sync-job list` show; snapshots restore
// byte-identical from the target; other roles and unknown jobs are refused.
#include <filesystem>
#include <string>
#include <vector>

#include "cli_server_fixture.h"

namespace cairn::cli_test {
namespace {

class SyncJobTest : public ServerTest {
 protected:
  // Starts the second server, whose "copy" store the jobs fill.
  void StartTarget() {
    copy_ = Path("copy");
    ASSERT_EQ(Cairn({"init", copy_}).exit_code, 0);
    state_b_ = Path("state-b");
    nlohmann::json config = {
        {"listen", {"127.0.0.1:0"}},
        {"state_dir", state_b_},
        {"stores", {{"copy", copy_}}},
        {"sync_jobs",
         {{"pull-a",
           {{"store", "copy"},
            {"from", url_},
            {"token", reader_},
            {"fingerprint", server_->fingerprint()},
            {"schedule", "mon..fri 03:00"}}},
          {"from-path",
           {{"store", "copy"}, {"from", store()}, {"target_ns", "mirror"}, {"transfer_last", 1}}}}}};
    WriteFile(Path("b.json"), config.dump(2));
    server_b_ = std::make_unique<ServerProcess>(std::vector<std::string>{"serve", "--config", Path("b.json")},
                                                Path("server-b.err"));
    ASSERT_GT(server_b_->port(), 0) << ReadFile(Path("server-b.err"));
    url_b_ = "https://127.0.0.1:" + std::to_string(server_b_->port()) + "/copy";
    admin_b_ = TokenB("admin-b", "admin");
  }

  std::string TokenB(const std::string& name, const std::string& role) {
    RunResult r = Cairn({"token", "create", name, "--state-dir", state_b_, "--store", "copy",
                         "--role", role});
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
    return r.out.substr(0, r.out.find('\n'));
  }

  RunResult OnB(std::vector<std::string> args, const std::string& token) {
    RunOptions options;
    options.env = {"CAIRN_CACHE_DIR=" + tmp_.Join("cache-b"),
                   "CAIRN_TRUSTED_SERVERS=" + tmp_.Join("servers"), "CAIRN_TOKEN=" + token,
                   "CAIRN_FINGERPRINT=" + server_b_->fingerprint()};
    // -r after the verb's subcommand (sync-job run, task list, …).
    args.insert(args.end(), {"-r", url_b_});
    return RunCairn(args, options);
  }

  std::string copy_, state_b_, url_b_, admin_b_;
  std::unique_ptr<ServerProcess> server_b_;
};

TEST_F(SyncJobTest, JobsRunAsServerTasksAndCopyByteIdentical) {
  StartTarget();
  // Started through the API, followed to its end.
  RunResult r = OnB({"sync-job", "run", "pull-a", "--json"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << ReadFile(Path("server-b.err"));
  nlohmann::json task = ParseJson(r.out);
  EXPECT_EQ(task["kind"], "sync") << r.out;
  EXPECT_EQ(task["job"], "pull-a") << r.out;
  EXPECT_EQ(task["state"], "ok") << r.out;
  EXPECT_EQ(task["report"]["copied"], 2u) << r.out;
  EXPECT_EQ(task["params"]["token"], "reader1") << r.out;  // the name, never the secret
  EXPECT_EQ(r.out.find(reader_.substr(reader_.find(':') + 1)), std::string::npos);
  const std::string id = task["id"].get<std::string>();

  // What the server copied restores byte-identical and verifies clean.
  std::string out = Path("out.img");
  r = Cairn({"restore", "-r", copy_, Snap("vm/100", 2), "disk0.img", out});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, out), "");
  r = Cairn({"restore", "-r", copy_, Snap("vm/100", 1), "root.tree", Path("tree-out")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ReadFile(Path("tree-out") + "/etc/app/config"), "port = 8007\nname = cairn\n");
  EXPECT_EQ(Cairn({"verify", "-r", copy_}).exit_code, 0);

  // The task is in the list, with its log; the job shows its last result
  // and its next scheduled run.
  r = OnB({"task", "list", "--json"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json tasks = ParseJson(r.out)["tasks"];
  ASSERT_EQ(tasks.size(), 1u) << r.out;
  EXPECT_EQ(tasks[0]["id"], id);
  EXPECT_EQ(tasks[0]["kind"], "sync");
  r = OnB({"task", "show", id, "--log"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_NE(r.out.find("sync job 'pull-a' into datastore 'copy'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("copied       " + Snap("vm/100", 2)), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sync ended: ok"), std::string::npos) << r.out;
  r = OnB({"sync-job", "list", "--json"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  nlohmann::json jobs = ParseJson(r.out)["jobs"];
  ASSERT_EQ(jobs.size(), 2u) << r.out;
  for (const auto& job : jobs) {
    if (job["name"] == "pull-a") {
      EXPECT_EQ(job["last"]["task"], id) << r.out;
      EXPECT_EQ(job["last"]["state"], "ok") << r.out;
      EXPECT_TRUE(job["next_run"].is_string()) << r.out;
      EXPECT_EQ(job["schedule"], "mon..fri 03:00");
    } else {
      EXPECT_TRUE(job["last"].is_null()) << r.out;
      EXPECT_TRUE(job["next_run"].is_null()) << r.out;  // on demand only
    }
  }

  // A second run copies nothing.
  r = OnB({"sync-job", "run", "pull-a", "--json"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["report"]["copied"], 0u) << r.out;
  EXPECT_EQ(ParseJson(r.out)["report"]["present"], 2u) << r.out;

  // From a path, into namespace "mirror", the newest snapshot only.
  r = OnB({"sync-job", "run", "from-path", "--json"}, admin_b_);
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(ParseJson(r.out)["report"]["copied"], 1u) << r.out;
  r = Cairn({"restore", "-r", copy_, "--ns", "mirror", Snap("vm/100", 2), "disk0.img",
             Path("out-ns.img")});
  ASSERT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(CompareFiles(image_, Path("out-ns.img")), "");

  // Only an admin token starts a job; an unknown job is named.
  r = OnB({"sync-job", "run", "pull-a"}, TokenB("backup-b", "backup"));
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("admin"), std::string::npos) << r.err;
  r = OnB({"sync-job", "run", "nope"}, admin_b_);
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_NE(r.err.find("no sync job 'nope'"), std::string::npos) << r.err;
}

class SyncJobConfigTest : public CliTest {};

TEST_F(SyncJobConfigTest, ABadJobStopsTheServerWithItsName) {
  nlohmann::json config = {{"listen", {"127.0.0.1:0"}},
                           {"state_dir", Path("state-c")},
                           {"stores", {{"main", store()}}},
                           {"sync_jobs", {{"j1", {{"store", "main"}, {"from", "/x"},
                                                  {"schedule", "every day"}}}}}};
  WriteFile(Path("c.json"), config.dump());
  RunResult r = Cairn({"serve", "--config", Path("c.json")});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("sync job 'j1': \"schedule\""), std::string::npos) << r.err;
  config["sync_jobs"]["j1"] = {{"store", "elsewhere"}, {"from", "/x"}};
  WriteFile(Path("c.json"), config.dump());
  r = Cairn({"serve", "--config", Path("c.json")});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_NE(r.err.find("no datastore named 'elsewhere'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace cairn::cli_test
