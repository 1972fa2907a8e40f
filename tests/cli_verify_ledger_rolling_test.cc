// `cairn verify` with its ledger, part 2 (part 1 and what the tests hold
// to: cli_verify_ledger_test.cc): rolling slices (--budget, --max-duration)
// stalest first and the coverage promise, verify while backups run, a
// snapshot removed between and during runs, and a damaged ledger.
#include "cli_verify_ledger_fixture.h"

namespace cairn::cli_test::verify_ledger_test {
namespace {

// --- 4. rolling verify --------------------------------------------------------

class VerifyLedgerRollingTest : public VerifyLedgerTest {
 protected:
  void SetUp() override {
    VerifyLedgerTest::SetUp();
    if (HasFatalFailure()) return;
    Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", kChunks, 51)});
    snap_ = Snap("vm/100", 1);
    ids_ = Ids(snap_);
    ASSERT_EQ(ids_.size(), kChunks);
    std::sort(ids_.begin(), ids_.end());
  }

  static constexpr uint64_t kChunks = 8;
  std::string snap_;
  std::vector<std::string> ids_;  // sorted
};

TEST_F(VerifyLedgerRollingTest, BudgetSlicesCoverEverythingStalestFirst) {
  // A ledger from long ago: the four smallest ids were checked, the
  // smallest most recently (so id order is not stalest-first order); the
  // other four were never checked.
  const std::vector<int64_t> old_times = {4000, 3000, 2000, 1000};
  std::vector<Record> history;
  for (size_t i = 0; i < old_times.size(); ++i) history.push_back({ids_[i], old_times[i], 0});
  fs::create_directories(LedgerDir());
  WriteFile(LedgerPath(), LedgerFileBytes(history));
  const std::set<std::string> never(ids_.begin() + 4, ids_.end());

  // Each 25 % slice checks two chunks: first the never-checked ones, then
  // the oldest check first: ids_[3] (1000) and ids_[2], then ids_[1], ids_[0].
  const std::vector<std::set<std::string>> expected_sets = {
      {}, {}, {ids_[3], ids_[2]}, {ids_[1], ids_[0]}};
  const std::vector<int64_t> expected_oldest = {1000, 1000, 3000, 0};
  std::set<std::string> seen;
  uint64_t checked_total = 0;
  size_t journal_before = 0;
  int64_t started = 0;
  for (int run = 0; run < 4; ++run) {
    SCOPED_TRACE("slice " + std::to_string(run));
    RunResult r;
    nlohmann::json v = VerifyJson({"--budget", "25"}, kExitOk, &r);
    EXPECT_EQ(v["ok"], true);
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(v["unique_chunks"], kChunks);
    EXPECT_EQ(v["checked_chunks"], 2);
    checked_total += v["checked_chunks"].get<uint64_t>();
    EXPECT_EQ(v["left"]["chunks"], kChunks - 2 * (run + 1));
    EXPECT_EQ(v["left"]["bytes"], (kChunks - 2 * (run + 1)) * kChunk);
    EXPECT_EQ(v["skipped"]["resumed_chunks"], 2 * run);
    if (run == 0) {
      EXPECT_EQ(v["resumed_from"], 0);
      ASSERT_TRUE(Exists(JobPath()));
      started = ParseJson(ReadFile(JobPath())).value("started", int64_t{0});
    } else {
      EXPECT_EQ(v["resumed_from"], started) << "each slice continues the first one's job";
    }
    if (run < 3) {
      EXPECT_GT(v["left"]["eta_seconds"].get<double>(), 0) << v.dump();
      EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "incomplete"}}));
      // Not judged yet: no verify state recorded.
      EXPECT_EQ(RecordedStates(), (std::map<std::string, std::string>{{snap_, ""}}));
      EXPECT_EQ(v["oldest_check"], expected_oldest[static_cast<size_t>(run)]);
      // Which chunks this slice checked: the journal's new records.
      std::vector<Record> journal = ReadJournal(JournalPath());
      std::set<std::string> now = IdsOf(journal, journal_before);
      journal_before = journal.size();
      EXPECT_EQ(now.size(), 2u);
      if (run < 2) {
        EXPECT_TRUE(std::includes(never.begin(), never.end(), now.begin(), now.end()))
            << "a never-checked chunk comes first";
      } else {
        EXPECT_EQ(now, expected_sets[static_cast<size_t>(run)]);
      }
      for (const auto& id : now) EXPECT_TRUE(seen.insert(id).second) << id << " checked twice";
    } else {
      EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "ok"}}));
      EXPECT_EQ(RecordedStates(), (std::map<std::string, std::string>{{snap_, "ok"}}));
      EXPECT_GE(v["oldest_check"].get<int64_t>(), started);
    }
  }
  EXPECT_GE(checked_total, kChunks);
  EXPECT_FALSE(Exists(JobPath()));
  std::vector<Record> ledger = ReadLedgerFile(LedgerPath());
  EXPECT_EQ(ledger.size(), kChunks);
  for (const Record& rec : ledger) EXPECT_GE(rec.time, started) << rec.id;
}

TEST_F(VerifyLedgerRollingTest, HumanReportOfASlice) {
  RunResult r = OnStore("verify", {"--budget", "50"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex(R"(left 4 chunks \(16\.00 MiB\) for the next run \(stalest first\); the )"
                        R"(rest takes about \d+ s at this speed; 1 snapshots not judged yet)")))
      << r.out;
  EXPECT_NE(r.out.find("1 snapshots: no damage found so far"), std::string::npos) << r.out;
  std::vector<std::string> lines = ReportLines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::regex_match(lines.back(), kFinalLine)) << lines.back();

  // The second half finishes the job.
  r = OnStore("verify", {"--budget", "50"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("resumed the run started "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 chunks (16.00 MiB) already done"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("left "), std::string::npos) << r.out;
}

TEST_F(VerifyLedgerRollingTest, MaxDurationLeavesTheRestWithAnEta) {
  // 300 ms a chunk, one at a time: a 1 s slice starts at most 4 of the 8.
  nlohmann::json v = VerifyJson({"--max-duration", "1s", "--inject-latency", "300", "--jobs", "1"});
  EXPECT_EQ(v["ok"], true);
  const uint64_t checked = v["checked_chunks"].get<uint64_t>();
  const uint64_t left = v["left"]["chunks"].get<uint64_t>();
  EXPECT_GE(left, 4u) << v.dump();
  EXPECT_EQ(checked + left, kChunks) << v.dump();
  EXPECT_EQ(v["left"]["bytes"], left * kChunk);
  // The ETA is the rest at this run's speed; unknown (-1) when the slice
  // checked nothing (a machine so loaded that setup took the whole second).
  if (checked > 0) {
    EXPECT_GT(v["left"]["eta_seconds"].get<double>(), 0) << v.dump();
  } else {
    EXPECT_EQ(v["left"]["eta_seconds"], -1) << v.dump();
  }
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "incomplete"}}));
  EXPECT_TRUE(Exists(JobPath()));

  // An unlimited run of the same scope finishes the job.
  v = VerifyJson({});
  EXPECT_EQ(v["ok"], true);
  EXPECT_GT(v["resumed_from"].get<int64_t>(), 0);
  EXPECT_EQ(v["skipped"]["resumed_chunks"], checked);
  EXPECT_EQ(v["checked_chunks"], left);
  EXPECT_EQ(v["left"]["chunks"], 0);
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "ok"}}));
  EXPECT_FALSE(Exists(JobPath()));
}

TEST_F(VerifyLedgerRollingTest, TinyMaxDurationLeavesEverything) {
  nlohmann::json v =
      VerifyJson({"--max-duration", "0.001s", "--inject-latency", "300", "--jobs", "1"});
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["checked_chunks"].get<uint64_t>() + v["left"]["chunks"].get<uint64_t>(), kChunks)
      << v.dump();
  EXPECT_GE(v["left"]["chunks"].get<uint64_t>(), kChunks - 1) << v.dump();
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "incomplete"}}));
}

// The coverage promise (--cover-days N): chunks not found ok within N-1 days
// are checked whatever the slice limit says. Ledger times are set relative
// to now, hours away from every threshold.
class VerifyLedgerCoverTest : public VerifyLedgerRollingTest {
 protected:
  static constexpr int64_t kHour = 3600;

  // A ledger saying ids_[i] was found ok ages[i] seconds ago.
  void CheckedAgo(const std::vector<int64_t>& ages) {
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    std::vector<Record> history;
    for (size_t i = 0; i < ages.size(); ++i) history.push_back({ids_[i], now - ages[i], 0});
    fs::create_directories(LedgerDir());
    WriteFile(LedgerPath(), LedgerFileBytes(history));
  }

  // The chunks this run read: the journal's records (the ledger folds the
  // journal in only when a run finishes; these runs leave chunks for later).
  std::set<std::string> Checked() const { return IdsOf(ReadJournal(JournalPath())); }
};

TEST_F(VerifyLedgerCoverTest, DueChunksAreCheckedPastATinyBudget) {
  // Promise: 3 days. Older than 2 days: ids_[0..3] (one just over); the
  // rest were checked a day or an hour ago.
  CheckedAgo(
      {60 * kHour, 60 * kHour, 60 * kHour, 49 * kHour, 24 * kHour, 24 * kHour, kHour, kHour});
  RunResult r;
  nlohmann::json v = VerifyJson({"--cover-days", "3", "--budget", "1"}, kExitOk, &r);
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["checked_chunks"], 4) << "1 % of 32 MiB is not one chunk: the due ones, no more";
  EXPECT_EQ(Checked(), std::set<std::string>(ids_.begin(), ids_.begin() + 4));
  EXPECT_EQ(v["left"]["chunks"], 4);
  const nlohmann::json& cover = v["cover"];
  ASSERT_TRUE(cover.is_object()) << v.dump();
  EXPECT_EQ(cover["days"], 3);
  EXPECT_EQ(cover["due_chunks"], 4);
  EXPECT_EQ(cover["due_bytes"], 4 * kChunk);
  EXPECT_EQ(cover["due_over_limit"], true);
  EXPECT_EQ(cover["covered_chunks"], kChunks) << "every chunk was found ok within 3 days now";
  EXPECT_EQ(cover["covered_fraction"], 1.0);
  EXPECT_EQ(cover["never_checked_chunks"], 0);
  EXPECT_LT(cover["oldest_age_days"].get<double>(), 1.5) << v.dump();
  EXPECT_GT(cover["oldest_age_days"].get<double>(), 0.5) << v.dump();
  EXPECT_EQ(cover["pace_bytes_per_day"], 4 * kChunk) << "today's due chunks are the peak";
  EXPECT_GT(cover["pace_seconds_per_day"].get<double>(), 0) << v.dump();
  EXPECT_NE(r.err.find("cairn: warning: --cover-days 3: 4 chunks (16.00 MiB) not found ok "
                       "within 2 days had to be checked now, more than the --budget allows"),
            std::string::npos)
      << r.err;
  const std::string order = v.value("order", "");
  EXPECT_TRUE(order == "id" || order == "inode") << v.dump();
}

TEST_F(VerifyLedgerCoverTest, AloneItChecksTheDueChunksAndTheEvenPace) {
  // ids_[0..1] are due; the other six fall due in three days. The even
  // pace is the most of 8 MiB today, 8/2 by tomorrow, 32/3 within three
  // days: 32/3 MiB a day, so the run adds the stalest chunk after the due
  // ones (all six equally stale: the smallest id).
  CheckedAgo({60 * kHour, 60 * kHour, kHour, kHour, kHour, kHour, kHour, kHour});
  RunResult r;
  nlohmann::json v = VerifyJson({"--cover-days", "3"}, kExitOk, &r);
  EXPECT_EQ(r.err, "") << "no limit was given: nothing to warn about";
  EXPECT_EQ(v["checked_chunks"], 3);
  EXPECT_EQ(Checked(), (std::set<std::string>{ids_[0], ids_[1], ids_[2]}));
  EXPECT_EQ(v["cover"]["due_chunks"], 2);
  EXPECT_EQ(v["cover"]["due_over_limit"], false);
  EXPECT_EQ(v["cover"]["pace_bytes_per_day"], (kChunks * kChunk + 2) / 3);
  EXPECT_EQ(v["cover"]["covered_chunks"], kChunks);
  EXPECT_EQ(v["left"]["chunks"], kChunks - 3);
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "incomplete"}}));
}

TEST_F(VerifyLedgerCoverTest, DueChunksOutlastMaxDurationWithAHumanReport) {
  // All due; 50 ms a chunk, one at a time, against a 1 ms slice.
  CheckedAgo(std::vector<int64_t>(kChunks, 60 * kHour));
  RunResult r = OnStore("verify", {"--cover-days", "3", "--max-duration", "0.001s",
                                   "--inject-latency", "50", "--jobs", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  // Finished: the journal was folded into the ledger, every chunk checked now.
  std::vector<Record> ledger = ReadLedgerFile(LedgerPath());
  EXPECT_EQ(IdsOf(ledger), std::set<std::string>(ids_.begin(), ids_.end()));
  for (const Record& rec : ledger) {
    EXPECT_GT(rec.time, static_cast<int64_t>(::time(nullptr)) - kHour) << rec.id;
  }
  EXPECT_NE(r.err.find("8 chunks (32.00 MiB) not found ok within 2 days had to be checked now, "
                       "more than the --max-duration allows; checked them anyway. The promise "
                       "needs about "),
            std::string::npos)
      << r.err;
  const std::vector<std::string> lines = ReportLines(r.out);
  const std::regex coverage(R"(coverage: 8 of 8 chunks \(100%\) found ok within 3 days, the )"
                            R"(oldest check 0\.0 days ago; the promise takes about \d+ s a day )"
                            R"(at this speed \(32\.00 MiB a day\))");
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return std::regex_match(line, coverage);
  })) << r.out;
  // --inject-latency wraps the store: its layout is unknown, id order.
  EXPECT_NE(std::find(lines.begin(), lines.end(), "chunk order: id (auto)"), lines.end()) << r.out;
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.out;
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::regex_match(lines.back(), kFinalLine)) << lines.back();
}

TEST_F(VerifyLedgerRollingTest, OrderFlag) {
  EXPECT_EQ(VerifyJson({"--order", "inode"})["order"], "inode");
  EXPECT_EQ(VerifyJson({"--order", "id"})["order"], "id");
  const std::string automatic = VerifyJson({})["order"];
  EXPECT_TRUE(automatic == "id" || automatic == "inode") << automatic;
  EXPECT_EQ(VerifyJson({"--order", "inode", "--inject-latency", "1"})["order"], "id")
      << "a wrapped source has no inodes to sort by";
  RunResult r = OnStore("verify", {"--order", "inode"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  const std::vector<std::string> lines = ReportLines(r.out);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "chunk order: inode"), lines.end()) << r.out;
  EXPECT_EQ(OnStore("verify", {"--order", "disk"}).exit_code, kExitUsage);
  EXPECT_EQ(OnStore("verify", {"--cover-days", "0"}).exit_code, kExitUsage);
}

// --- 5. verify while backups run ----------------------------------------------

TEST_F(VerifyLedgerTest, StressBackupsWhileVerifying) {
  // Three versions of one disk (each changes one chunk) and another disk.
  const std::string a0 = Path("a0.raw"), a1 = Path("a1.raw"), a2 = Path("a2.raw");
  ImageWriter(a0, 3 * kChunk, 61).Random(0, 3 * kChunk);
  WriteFile(a1, ReadFile(a0));
  WriteRandomAt(a1, kChunk + 100, 4096, 62);
  WriteFile(a2, ReadFile(a1));
  WriteRandomAt(a2, 2 * kChunk + 100, 4096, 63);
  const std::string c0 = Path("c0.raw");
  ImageWriter(c0, 2 * kChunk + kMiB, 64).Random(0, 2 * kChunk).Text(2 * kChunk, kMiB);
  Backup("vm/100", 1, {"disk0.img=" + a0});
  Backup("vm/200", 2, {"disk0.img=" + c0});

  // In the background: backups into the same group and new ones, and a
  // verify of its own (two verifies sharing the ledger).
  auto backup = [&](const std::string& id, int t, const std::string& image) {
    return RunCairn(
        {"backup", "-r", store(), "--id", id, "--time", SnapTime(t), "disk0.img=" + image});
  };
  std::vector<RunResult> backups;
  RunResult side_verify;
  std::thread writer([&] {
    backups.push_back(backup("vm/100", 3, a1));
    backups.push_back(backup("vm/300", 4, a2));
    side_verify = RunCairn({"verify", "-r", store(), "--json"});
    backups.push_back(backup("vm/100", 5, a2));
  });
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("verify " + std::to_string(i));
    RunResult r;
    // A little latency keeps each run going while the backups write.
    std::vector<std::string> args = {"--inject-latency", "20"};
    if (i % 2 == 1) args.insert(args.end(), {"--budget", "50"});
    nlohmann::json v = VerifyJson(args, kExitOk, &r);
    EXPECT_EQ(v["ok"], true) << v.dump();
    EXPECT_EQ(v["problems"], nlohmann::json::array());
    EXPECT_EQ(r.err, "");
  }
  writer.join();
  ASSERT_EQ(backups.size(), 3u);
  for (const RunResult& b : backups) EXPECT_EQ(b.exit_code, kExitOk) << b.Describe();
  EXPECT_EQ(side_verify.exit_code, kExitOk) << side_verify.Describe();
  nlohmann::json side = ParseJson(side_verify.out);
  EXPECT_TRUE(side.is_object() && side["ok"] == true) << side_verify.Describe();

  RunResult r;
  nlohmann::json v = VerifyJson({}, kExitOk, &r);
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(r.err, "");
  const std::map<std::string, std::string> all_ok = {{Snap("vm/100", 1), "ok"},
                                                     {Snap("vm/100", 3), "ok"},
                                                     {Snap("vm/100", 5), "ok"},
                                                     {Snap("vm/200", 2), "ok"},
                                                     {Snap("vm/300", 4), "ok"}};
  EXPECT_EQ(States(v), all_ok);
  EXPECT_EQ(RecordedStates(), all_ok);
  r = OnStore("restore", {"vm/100/latest", "disk0.img", Path("back.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(a2, Path("back.raw")), "");
}

// --- 6. a snapshot removed -------------------------------------------------------

class VerifyLedgerRemovedTest : public VerifyLedgerTest {
 protected:
  void SetUp() override {
    VerifyLedgerTest::SetUp();
    if (HasFatalFailure()) return;
    Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", 4, 71)});
    Backup("vm/200", 2, {"disk0.img=" + SparseImage("b.raw", 4, 72)});
    kept_ = Snap("vm/100", 1);
    gone_ = Snap("vm/200", 2);
  }

  // verify --json of the whole store, removing gone_ once the run has read
  // the manifests and started checking (job.json is written then); 200 ms a
  // chunk, one at a time, leaves time. `result` gets the run.
  nlohmann::json VerifyRemovingMidRun(RunResult* result) {
    bool removed = false;
    RunOptions options;
    options.poll = [&](pid_t) {
      if (!removed && Exists(JobPath())) {
        fs::remove_all(SnapshotDir(store(), gone_));
        removed = true;
      }
      return false;
    };
    nlohmann::json v =
        VerifyJson({"--inject-latency", "200", "--jobs", "1"}, kExitOk, result, options);
    EXPECT_TRUE(removed);
    return v;
  }

  std::string kept_, gone_;
};

TEST_F(VerifyLedgerRemovedTest, BetweenRunsIsQuiet) {
  nlohmann::json v = VerifyJson({"--budget", "50"});
  ASSERT_EQ(v["left"]["chunks"], 4) << v.dump();
  ASSERT_TRUE(fs::remove_all(SnapshotDir(store(), gone_)) > 0);

  // The resumed run and a fresh one: only the remaining snapshot, no word
  // about the other.
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    RunResult r;
    v = VerifyJson({}, kExitOk, &r);
    EXPECT_EQ(v["ok"], true);
    EXPECT_EQ(v["problems"], nlohmann::json::array());
    EXPECT_EQ(States(v), (std::map<std::string, std::string>{{kept_, "ok"}}));
    EXPECT_EQ(v["unique_chunks"], 4);
    EXPECT_EQ(v["resumed_from"].get<int64_t>() > 0, run == 0);
    EXPECT_EQ(r.err, "");
  }
  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ((r.out + r.err).find(gone_), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.out;
}

TEST_F(VerifyLedgerRemovedTest, DuringARunFailsNothing) {
  RunResult r;
  nlohmann::json v = VerifyRemovingMidRun(&r);
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["problems"], nlohmann::json::array());
  EXPECT_EQ(v["left"]["chunks"], 0);
  EXPECT_EQ(States(v).count(kept_), 1u);
  EXPECT_EQ(States(v)[kept_], "ok");
  EXPECT_FALSE(Exists(SnapshotDir(store(), gone_))) << "verify recreated the removed snapshot";
  EXPECT_EQ(ListedSnapshots(), std::vector<std::string>{kept_});
  EXPECT_EQ(RecordedStates(), (std::map<std::string, std::string>{{kept_, "ok"}}));
  // The next run knows nothing of it.
  v = VerifyJson({}, kExitOk, &r);
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{kept_, "ok"}}));
  EXPECT_EQ(r.err, "");
}

// src/verify/verify.h promises that "a snapshot removed while it runs is
// dropped from the report quietly", also when it goes after its manifest
// was read. (It once stayed in the report as "ok", with a warning on
// stderr: "could not record verify state of …: NotFound".)
TEST_F(VerifyLedgerRemovedTest, DuringARunIsQuiet) {
  RunResult r;
  nlohmann::json v = VerifyRemovingMidRun(&r);
  EXPECT_EQ(r.err, "") << "the removed snapshot is not worth a warning";
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{kept_, "ok"}}));
}

// --- 7. a damaged ledger ------------------------------------------------------------

TEST_F(VerifyLedgerTest, DamagedLedgerIsAWarningAndHeals) {
  Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", 8, 81)});
  // A ledger from long ago (written here rather than by a full verify: a
  // job started in the same second as that verify would count its checks
  // as its own, see BudgetSlicesCoverEverythingStalestFirst).
  std::vector<Record> history;
  for (const std::string& id : Ids(Snap("vm/100", 1))) history.push_back({id, 1000, 0});
  fs::create_directories(LedgerDir());
  WriteFile(LedgerPath(), LedgerFileBytes(history));
  // Two quarter slices: a job and two journal batches of two records each.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(VerifyJson({"--budget", "25"})["checked_chunks"], 2);
  const uint64_t batch = kBatchOverhead + 2 * kRecord;
  ASSERT_EQ(FileSize(JournalPath()), 2 * batch);

  // The second batch torn (a writer killed mid-append), the ledger garbled.
  TruncateFile(JournalPath(), batch + batch / 2);
  FlipBit(LedgerPath(), kLedgerHeader + 3 * kRecord + 7, 5);

  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("ledger"), std::string::npos) << r.Describe();
  EXPECT_NE(r.err.find("journal"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.Describe();
  // The first batch still counts: its chunks are resumed, not redone.
  EXPECT_NE(r.out.find("2 chunks (8.00 MiB) already done"), std::string::npos) << r.Describe();

  // Healed: a valid ledger of every chunk, an empty journal, no job, and
  // the next run says nothing about the ledger.
  EXPECT_EQ(ReadLedgerFile(LedgerPath()).size(), 8u);
  EXPECT_EQ(FileSize(JournalPath()), 0u);
  EXPECT_FALSE(Exists(JobPath()));
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.err, "") << r.Describe();

  // Worse: garbage for a ledger, a journal and a job file.
  WriteFile(LedgerPath(), "not a ledger");
  WriteFile(JournalPath(), std::string(1000, 'x'));
  WriteFile(JobPath(), "{\"scope\": ");
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("ledger"), std::string::npos) << r.Describe();
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.Describe();
  EXPECT_EQ(r.out.find("resumed"), std::string::npos) << r.Describe();
  EXPECT_EQ(ReadLedgerFile(LedgerPath()).size(), 8u);
  r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(r.err, "") << r.Describe();
}

// With --json the ledger warning goes to stderr like every other warning,
// and stdout stays JSON. (It was once printed only in the human branch.)
TEST_F(VerifyLedgerTest, DamagedLedgerWarnsInJsonMode) {
  Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", 2, 82)});
  ASSERT_EQ(OnStore("verify", {}).exit_code, kExitOk);
  WriteFile(LedgerPath(), "not a ledger");
  RunResult r;
  nlohmann::json v = VerifyJson({}, kExitOk, &r);
  EXPECT_EQ(v["ok"], true);
  EXPECT_NE(r.err.find("ledger"), std::string::npos) << r.Describe();
}

}  // namespace
}  // namespace cairn::cli_test::verify_ledger_test
