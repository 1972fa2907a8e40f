#include "server/tasks.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "crypto/sha256.h"
#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

using datastore::SnapshotRef;
using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

// Reading a chunk file (a 64-hex-digit name) takes `delay`: a verify that
// lasts long enough to be seen running.
class SlowChunksEnv : public EnvWrapper {
 public:
  explicit SlowChunksEnv(Env* target) : EnvWrapper(target) {}
  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& p) override {
    std::string base = p.substr(p.rfind('/') + 1);
    if (base.size() == 64) std::this_thread::sleep_for(delay);
    return EnvWrapper::OpenReadable(p);
  }
  std::chrono::milliseconds delay{0};
};

class TaskManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string path = dir_.Join("store");
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, path));
    auto store = datastore::Datastore::Open(slow_, path);
    CAIRN_ASSERT_OK(store);
    store_ = store->get();
    stores_.emplace("main", std::move(*store));
    a_ = Put(test_util::RandomBytes(kChunk, 1));
    b_ = Put(test_util::RandomBytes(kChunk, 2));
    c_ = Put(test_util::RandomBytes(kChunk, 3));
    Commit(t0_, {a_, b_});
    Commit(t1_, {a_, c_});
  }

  crypto::Digest Put(const Bytes& plain) {
    crypto::Digest id = crypto::Sha256(plain);
    auto stored = blob::Encode(plain);
    EXPECT_TRUE(stored.ok());
    EXPECT_TRUE(store_->chunks().Insert(id, *stored).ok());
    return id;
  }

  void Commit(const SnapshotRef& snap, std::vector<crypto::Digest> ids) {
    auto w = datastore::SnapshotWriter::Begin(*store_, snap);
    CAIRN_ASSERT_OK(w);
    uint64_t size = uint64_t{kChunk} * ids.size();
    CAIRN_ASSERT_OK((*w)->AddImage("disk0.img", index::FixedIndex(size, kChunk, std::move(ids))));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }

  std::unique_ptr<TaskManager> Manager() {
    return std::make_unique<TaskManager>(*env_, *logger_, dir_.Join("state"), stores_);
  }

  TaskInfo RunToEnd(TaskManager& m, const VerifyTaskParams& params = {}) {
    auto started = m.StartVerify("main", "v1", params);
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (!started.ok()) return {};
    EXPECT_FALSE(started->already_running);
    EXPECT_TRUE(m.WaitForTest(started->id, 60'000));
    auto info = m.Get(started->id);
    EXPECT_TRUE(info.ok()) << info.status().ToString();
    return info.ok() ? *info : TaskInfo{};
  }

  std::vector<std::string> LogOf(TaskManager& m, const std::string& id, size_t since = 0) {
    size_t total = 0;
    auto lines = m.Log(id, since, &total);
    EXPECT_TRUE(lines.ok()) << lines.status().ToString();
    return lines.ok() ? *lines : std::vector<std::string>{};
  }

  static bool AnyContains(const std::vector<std::string>& lines, std::string_view what) {
    for (const auto& l : lines) {
      if (l.find(what) != std::string::npos) return true;
    }
    return false;
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  SlowChunksEnv slow_{env_.get()};
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::map<std::string, std::unique_ptr<datastore::Datastore>> stores_;
  datastore::Datastore* store_ = nullptr;
  SnapshotRef t0_{{"", "vm", "100"}, kT0};
  SnapshotRef t1_{{"", "vm", "100"}, kT0 + 3600};
  crypto::Digest a_, b_, c_;
};

TEST_F(TaskManagerTest, CleanStoreEndsOkWithSummaryLogAndStatusOnDisk) {
  auto m = Manager();
  TaskInfo info = RunToEnd(*m);
  EXPECT_EQ(info.state, TaskState::kOk) << info.error;
  EXPECT_TRUE(IsTaskId(info.id)) << info.id;
  EXPECT_EQ(info.kind, "verify");
  EXPECT_EQ(info.store, "main");
  EXPECT_EQ(info.token, "v1");
  EXPECT_GT(info.ended, 0);
  EXPECT_EQ(info.problems, 0u);
  EXPECT_EQ(info.summary.rfind("verified ", 0), 0u) << info.summary;
  EXPECT_NE(info.summary.find("(0 errors)"), std::string::npos) << info.summary;
  EXPECT_EQ(info.result, "2 snapshots: all ok");
  EXPECT_EQ(info.done_bytes, info.total_bytes);
  EXPECT_EQ(info.total_bytes, 3u * kChunk);  // a, b, c once each
  // The verify state is recorded with each snapshot, as a local verify does.
  for (const auto& snap : {t0_, t1_}) {
    EXPECT_TRUE(std::filesystem::exists(
        JoinPath(store_->SnapshotDir(snap), datastore::kVerifyStateFileName)));
  }
  auto lines = LogOf(*m, info.id);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_NE(lines.front().find("started by token 'v1'"), std::string::npos) << lines.front();
  EXPECT_NE(lines.back().find("verify ended: ok"), std::string::npos) << lines.back();
  EXPECT_TRUE(AnyContains(lines, info.summary));
  // ?since= skips lines.
  EXPECT_EQ(LogOf(*m, info.id, 1).size(), lines.size() - 1);
  EXPECT_TRUE(LogOf(*m, info.id, 1000).empty());
  // Status on disk, read back by a new manager (a restarted server).
  m.reset();
  EXPECT_TRUE(std::filesystem::exists(dir_.Join("state/tasks/" + info.id + ".json")));
  auto again = Manager()->Get(info.id);
  CAIRN_ASSERT_OK(again);
  EXPECT_EQ(again->state, TaskState::kOk);
  EXPECT_EQ(again->summary, info.summary);
}

TEST_F(TaskManagerTest, CorruptChunkFailsNamesItAndIsQuarantined) {
  std::string victim = store_->chunks().ChunkPath(b_);
  {
    Bytes data = test_util::ReadFileOrFail(victim);
    data[data.size() / 2] ^= 0x10;
    std::filesystem::remove(victim);
    test_util::WriteFileOrFail(victim, data);
  }
  auto m = Manager();
  TaskInfo info = RunToEnd(*m);
  EXPECT_EQ(info.state, TaskState::kFailed);
  EXPECT_EQ(info.problems, 1u);
  ASSERT_EQ(info.problem_details.size(), 1u);
  const std::string hex = crypto::DigestHex(b_);
  EXPECT_NE(info.problem_details[0]["what"].get<std::string>().find(hex), std::string::npos);
  EXPECT_EQ(info.result, "2 snapshots: 1 snapshots FAILED");
  auto lines = LogOf(*m, info.id);
  EXPECT_TRUE(AnyContains(lines, "BAD chunk " + hex)) << lines.size();
  EXPECT_TRUE(AnyContains(lines, "needed by " + t0_.ToString()));
  EXPECT_TRUE(AnyContains(lines, "verify ended: failed"));
  EXPECT_FALSE(std::filesystem::exists(victim));
  EXPECT_TRUE(std::filesystem::exists(victim + ".bad"));
}

TEST_F(TaskManagerTest, ScopeGroupSnapshotAndBadScope) {
  auto m = Manager();
  VerifyTaskParams p;
  p.snapshot = "vm/100/" + datastore::FormatRfc3339(kT0);
  TaskInfo one = RunToEnd(*m, p);
  EXPECT_EQ(one.state, TaskState::kOk);
  EXPECT_EQ(one.result, "1 snapshots: all ok");
  EXPECT_EQ(one.params.snapshot, p.snapshot);
  p.snapshot = "vm/100";
  EXPECT_EQ(RunToEnd(*m, p).result, "2 snapshots: all ok");
  p.snapshot = "vm/999";
  EXPECT_EQ(CodeOf(m->StartVerify("main", "v1", p)), StatusCode::kNotFound);
  p.snapshot = "";
  p.ns = "nope";
  EXPECT_EQ(CodeOf(m->StartVerify("main", "v1", p)), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(m->StartVerify("other", "v1", {})), StatusCode::kNotFound);
}

// A gc task runs maintenance::RunGc and keeps its report as `gc --json`
// prints it; the status round-trips through its file with kind and params.
TEST_F(TaskManagerTest, GcTaskKeepsTheReportAndRoundTrips) {
  auto m = Manager();
  GcTaskParams params;
  params.dry_run = true;
  params.grace_s = 0;
  auto started = m->StartGc("main", "admin1", params);
  CAIRN_ASSERT_OK(started);
  ASSERT_TRUE(m->WaitForTest(started->id, 60'000));
  auto info = m->Get(started->id);
  CAIRN_ASSERT_OK(info);
  EXPECT_EQ(info->kind, "gc");
  EXPECT_EQ(info->state, TaskState::kOk) << info->error;
  EXPECT_EQ(info->report["dry_run"], true);
  EXPECT_EQ(info->report["snapshots"], 2);
  auto back = TaskInfo::FromJson(info->ToJson());
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->gc_params.dry_run, true);
  EXPECT_EQ(back->gc_params.grace_s, 0);
  EXPECT_EQ(back->report, info->report);
  EXPECT_TRUE(AnyContains(LogOf(*m, started->id), "gc ended: ok"));
  for (const char* bad : {R"({"dry_run":1})", R"({"grace_s":-1})", R"({"threads":999})",
                          R"({"keep":1})"}) {
    EXPECT_EQ(CodeOf(GcTaskParams::FromJson(nlohmann::json::parse(bad))),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_F(TaskManagerTest, ParamsFromJson) {
  auto p = VerifyTaskParams::FromJson(nlohmann::json::parse(
      R"({"ns":"a","snapshot":"vm/1","outdated_after_days":1.5,"max_duration_s":60,
          "budget_percent":10,"cover_days":7,"order":"id"})"));
  CAIRN_ASSERT_OK(p);
  EXPECT_EQ(p->ns, "a");
  EXPECT_EQ(p->snapshot, "vm/1");
  EXPECT_EQ(p->outdated_after_days, 1.5);
  EXPECT_EQ(p->max_duration_s, 60);
  EXPECT_EQ(p->cover_days, 7);
  EXPECT_EQ(p->order, "id");
  CAIRN_EXPECT_OK(VerifyTaskParams::FromJson(nlohmann::json(nullptr)));
  CAIRN_EXPECT_OK(VerifyTaskParams::FromJson(nlohmann::json::object()));
  for (const char* bad : {R"({"snapshots":"x"})", R"({"ns":1})", R"({"order":"random"})",
                          R"({"budget_percent":101})", R"({"max_duration_s":1.5})", "[]"}) {
    EXPECT_EQ(CodeOf(VerifyTaskParams::FromJson(nlohmann::json::parse(bad))),
              StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST_F(TaskManagerTest, OnePerStoreAndStopCancelsTheRunningTask) {
  // Enough chunks that the reads in flight cannot start them all at once.
  std::vector<crypto::Digest> many;
  for (int i = 0; i < 64; ++i) many.push_back(Put(test_util::RandomBytes(kChunk, 100 + i)));
  Commit(SnapshotRef{{"", "vm", "200"}, kT0}, many);
  slow_.delay = std::chrono::milliseconds(300);
  auto m = Manager();
  auto first = m->StartVerify("main", "v1", {});
  CAIRN_ASSERT_OK(first);
  EXPECT_FALSE(first->already_running);
  auto second = m->StartVerify("main", "admin", {});
  CAIRN_ASSERT_OK(second);
  EXPECT_TRUE(second->already_running);
  EXPECT_EQ(second->id, first->id);
  auto running = m->Get(first->id);
  CAIRN_ASSERT_OK(running);
  EXPECT_EQ(running->state, TaskState::kRunning);
  EXPECT_EQ(m->List().size(), 1u);
  auto t0 = std::chrono::steady_clock::now();
  m->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  auto stopped = m->Get(first->id);
  CAIRN_ASSERT_OK(stopped);
  EXPECT_EQ(stopped->state, TaskState::kError);
  EXPECT_NE(stopped->error.find("server stopped"), std::string::npos) << stopped->error;
  EXPECT_EQ(CodeOf(m->StartVerify("main", "v1", {})), StatusCode::kUnavailable);
}

TEST_F(TaskManagerTest, ATaskLeftRunningOnDiskIsMarkedErrorAtStart) {
  std::string id(32, 'a');
  TaskInfo info;
  info.id = id;
  info.store = "main";
  info.token = "v1";
  info.started = kT0;
  std::filesystem::create_directories(dir_.Join("state/tasks"));
  test_util::WriteFileOrFail(dir_.Join("state/tasks/" + id + ".json"),
                             AsBytes(info.ToJson().dump()));
  auto m = Manager();
  auto got = m->Get(id);
  CAIRN_ASSERT_OK(got);
  EXPECT_EQ(got->state, TaskState::kError);
  EXPECT_EQ(got->error, "the server stopped during the task");
  EXPECT_GT(got->ended, 0);
  EXPECT_TRUE(AnyContains(LogOf(*m, id), "the server stopped during the task"));
  EXPECT_EQ(CodeOf(m->Get(std::string(32, 'b'))), StatusCode::kNotFound);
  EXPECT_EQ(CodeOf(m->Get("../tokens")), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::server
