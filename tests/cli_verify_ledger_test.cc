// `cairn verify` with its ledger (docs/ARCHITECTURE.md, "The verify ledger";
// docs/FORMAT.md, "Verify ledger"), run as a user runs it: the final line
// and the JSON report, --outdated-after, damage of every kind found on every
// run with its dependents and byte ranges, resume after a SIGKILL, rolling
// slices (--budget, --max-duration) stalest first, verify racing backups, a
// snapshot removed between and during runs, and a damaged ledger.
//
// Small deterministic data: images from ImageWriter with fixed seeds; most
// use "sparse" chunks (64 random bytes, then zeros), which are distinct,
// cheap to hash and compress to almost nothing. Nothing asserts on time:
// where a run must be slow (to be killed or cut short) it gets
// --inject-latency, and kills wait for a file to appear rather than a clock.
//
// This file: the report, damage, resume; cli_verify_ledger_rolling_test.cc:
// rolling slices, racing backups, removed snapshots, a damaged ledger; the
// fixture: cli_verify_ledger_fixture.h.
#include "cli_verify_ledger_fixture.h"

namespace cairn::cli_test::verify_ledger_test {
namespace {

// --- 1. the report -----------------------------------------------------------

class VerifyLedgerReportTest : public VerifyLedgerTest {
 protected:
  void SetUp() override {
    VerifyLedgerTest::SetUp();
    if (HasFatalFailure()) return;
    // Chunk 0 random (stored raw), 1 text (zstd), 2 random, 3 a 1 MiB tail.
    image_ = Path("a.raw");
    ImageWriter(image_, kImageSize, 11)
        .Random(0, kChunk)
        .Text(kChunk, kChunk)
        .Random(2 * kChunk, kChunk)
        .Random(3 * kChunk, kMiB);
    Backup("vm/100", 1, {"disk0.img=" + image_});
    snap_ = Snap("vm/100", 1);
  }

  static constexpr uint64_t kImageSize = 3 * kChunk + kMiB;
  std::string image_, snap_;
};

TEST_F(VerifyLedgerReportTest, FinalLineAndJsonFields) {
  RunResult r = OnStore("verify", {});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> lines = ReportLines(r.out);
  ASSERT_FALSE(lines.empty()) << r.Describe();
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines.back(), m, kFinalLine)) << lines.back();
  EXPECT_EQ(m[1], "0");
  EXPECT_NE(r.out.find("1 snapshots: all ok"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "") << "a clean verify writes nothing to stderr";

  // A second full run (no --outdated-after) checks everything again.
  nlohmann::json v = VerifyJson({});
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["errors"], 0);
  EXPECT_EQ(v["problems"], nlohmann::json::array());
  ASSERT_EQ(v["snapshots"].size(), 1u) << v.dump();
  EXPECT_EQ(v["snapshots"][0]["snapshot"], snap_);
  EXPECT_EQ(v["snapshots"][0]["state"], "ok");
  EXPECT_EQ(v["unique_chunks"], 4);
  EXPECT_EQ(v["selected_bytes"], kImageSize);
  EXPECT_EQ(v["checked_chunks"], 4);
  EXPECT_EQ(v["raw_bytes"], kImageSize);
  EXPECT_EQ(
      v["skipped"],
      (nlohmann::json{
          {"fresh_chunks", 0}, {"fresh_bytes", 0}, {"resumed_chunks", 0}, {"resumed_bytes", 0}}));
  EXPECT_EQ(v["left"]["chunks"], 0);
  EXPECT_EQ(v["left"]["bytes"], 0);
  EXPECT_TRUE(v["left"]["eta_seconds"].is_number()) << v.dump();
  EXPECT_EQ(v["resumed_from"], 0);
  EXPECT_GT(v["oldest_check"].get<int64_t>(), 1700000000) << "a unix time";
  EXPECT_TRUE(v["seconds"].is_number()) << v.dump();
  // A finished run leaves no job behind and folds the journal into the ledger.
  EXPECT_FALSE(Exists(JobPath()));
  EXPECT_EQ(FileSize(JournalPath()), 0u);
  const std::vector<std::string> ids = Ids(snap_);
  EXPECT_EQ(IdsOf(ReadLedgerFile(LedgerPath())), std::set<std::string>(ids.begin(), ids.end()));
  EXPECT_EQ(RecordedStates(), (std::map<std::string, std::string>{{snap_, "ok"}}));
}

TEST_F(VerifyLedgerReportTest, OutdatedAfterSkipsChunksFoundOkRecently) {
  ASSERT_EQ(OnStore("verify", {}).exit_code, kExitOk);

  // Right after a full run, every chunk is fresh: nothing is read.
  nlohmann::json v = VerifyJson({"--outdated-after", "1"});
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["checked_chunks"], 0);
  EXPECT_EQ(v["raw_bytes"], 0);
  EXPECT_EQ(v["skipped"]["fresh_chunks"], 4);
  EXPECT_EQ(v["skipped"]["fresh_bytes"], kImageSize);
  EXPECT_EQ(v["left"]["chunks"], 0);
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{snap_, "ok"}}));
  RunResult r = OnStore("verify", {"--outdated-after", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("skipped 4 chunks"), std::string::npos) << r.out;
  std::vector<std::string> lines = ReportLines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(std::regex_match(lines.back(), kFinalLine)) << lines.back();
  EXPECT_EQ(lines.back().rfind("verified 0.00/0.00 MiB in ", 0), 0u) << lines.back();

  // The ledger's contract: a chunk found ok within the window is not read
  // again, so damage done since is not seen by --outdated-after runs until
  // the entry is older than the window. A plain run (or one whose window
  // has passed) finds it, and from then on the ledger records the failure,
  // which no window ever skips.
  FlipBit(ChunkFiles(store()).at(Ids(snap_)[0]), 64 + 4096, 3);
  v = VerifyJson({"--outdated-after", "1"});
  EXPECT_EQ(v["ok"], true) << "by design: the ledger says this chunk was ok today";
  EXPECT_EQ(v["checked_chunks"], 0);
  EXPECT_EQ(v["skipped"]["fresh_chunks"], 4);

  v = VerifyJson({}, kExitCorruption);
  ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
  EXPECT_EQ(v["problems"][0]["what"], "chunk " + Ids(snap_)[0]);
  EXPECT_EQ(v["errors"], 1);

  v = VerifyJson({"--outdated-after", "1"}, kExitCorruption);
  ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
  EXPECT_EQ(v["problems"][0]["what"], "chunk " + Ids(snap_)[0]);
  EXPECT_EQ(v["checked_chunks"], 1) << "only the failed chunk is read again";
  EXPECT_EQ(v["skipped"]["fresh_chunks"], 3);
  r = OnStore("verify", {"--outdated-after", "1"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  lines = ReportLines(r.out);
  ASSERT_FALSE(lines.empty());
  std::smatch m;
  ASSERT_TRUE(std::regex_match(lines.back(), m, kFinalLine)) << lines.back();
  EXPECT_EQ(m[1], "1");
}

TEST_F(VerifyLedgerReportTest, NoLedgerNeitherReadsNorWrites) {
  nlohmann::json v = VerifyJson({"--no-ledger"});
  EXPECT_EQ(v["checked_chunks"], 4);
  EXPECT_FALSE(Exists(LedgerDir()));
  ASSERT_EQ(OnStore("verify", {}).exit_code, kExitOk);
  ASSERT_TRUE(Exists(LedgerPath()));
  const std::string before = ReadFile(LedgerPath());
  // Not read: --outdated-after has nothing to go by.
  v = VerifyJson({"--no-ledger", "--outdated-after", "1"});
  EXPECT_EQ(v["checked_chunks"], 4);
  EXPECT_EQ(v["skipped"]["fresh_chunks"], 0);
  // Not written either.
  EXPECT_EQ(ReadFile(LedgerPath()), before);
  EXPECT_EQ(FileSize(JournalPath()), 0u);
}

// --- 2. damage of every kind, found on every run ------------------------------

// Two snapshots in two groups share one chunk, S (seeded random), at
// different places: vm/100 holds it at [4 MiB, 8 MiB), vm/200 at [0, 4 MiB)
// and [8 MiB, 12 MiB).
class VerifyLedgerDamageTest : public VerifyLedgerTest {
 protected:
  void SetUp() override {
    VerifyLedgerTest::SetUp();
    if (HasFatalFailure()) return;
    const std::string a = Path("a.raw"), b = Path("b.raw");
    ImageWriter(a, 3 * kChunk + kMiB, 31)
        .Random(0, kChunk)
        .Text(2 * kChunk, kChunk)
        .Random(3 * kChunk, kMiB);
    WriteRandomAt(a, kChunk, kChunk, kSharedSeed);
    ImageWriter(b, 4 * kChunk, 32).Random(kChunk, kChunk).Text(3 * kChunk, kChunk);
    WriteRandomAt(b, 0, kChunk, kSharedSeed);
    WriteRandomAt(b, 2 * kChunk, kChunk, kSharedSeed);
    WriteFile(Path("vm.conf"), "cores: 2\n");
    Backup("vm/100", 1, {"disk0.img=" + a});
    Backup("vm/200", 2, {"disk0.img=" + b, "vm.conf.blob=" + Path("vm.conf")});
    s1_ = Snap("vm/100", 1);
    s2_ = Snap("vm/200", 2);
    const auto ids1 = Ids(s1_), ids2 = Ids(s2_);
    ASSERT_EQ(ids1.size(), 4u);
    ASSERT_EQ(ids2.size(), 4u);
    shared_ = ids1[1];
    ASSERT_EQ(ids2[0], shared_);
    ASSERT_EQ(ids2[2], shared_);
    other_ = ids2[1];
    chunks_ = ChunkFiles(store());
    ASSERT_TRUE(chunks_.count(shared_) && chunks_.count(other_));
    ASSERT_EQ(OnStore("verify", {}).exit_code, kExitOk) << "clean before the damage";
  }

  // The problem report of the shared chunk, with both archives and their ranges.
  void ExpectSharedChunkProblem(const nlohmann::json& v, bool missing) {
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    const auto& p = v["problems"][0];
    EXPECT_EQ(p["what"], "chunk " + shared_);
    EXPECT_EQ(p["missing"], missing) << p.dump();
    EXPECT_FALSE(p["error"].get<std::string>().empty());
    const std::string a1 = s1_ + " disk0.img", a2 = s2_ + " disk0.img";
    EXPECT_EQ(p["affected"], (nlohmann::json{a1, a2}));
    auto range = [](uint64_t off) { return nlohmann::json{{"offset", off}, {"length", kChunk}}; };
    EXPECT_EQ(p["dependents"],
              (nlohmann::json{{{"archive", a1}, {"ranges", {range(kChunk)}}},
                              {{"archive", a2}, {"ranges", {range(0), range(2 * kChunk)}}}}))
        << p.dump();
    EXPECT_EQ(v["errors"], 1);
    EXPECT_EQ(States(v), (std::map<std::string, std::string>{{s1_, "failed"}, {s2_, "failed"}}));
  }

  // The damage is found by every kind of run: plain, again (the ledger now
  // holds the failure; a corrupt chunk has been quarantined and reads as
  // missing), with --outdated-after (a failure is never fresh), and of each
  // snapshot alone. `check` gets each whole-store report and the run number.
  void ExpectFoundEveryTime(const std::function<void(const nlohmann::json&, int)>& check) {
    for (int run = 0; run < 3; ++run) {
      SCOPED_TRACE("run " + std::to_string(run));
      std::vector<std::string> args;
      if (run == 2) args = {"--outdated-after", "30"};
      nlohmann::json v = VerifyJson(args, kExitCorruption);
      EXPECT_EQ(v["ok"], false);
      check(v, run);
    }
    RunResult r = OnStore("verify", {});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_NE(r.out.find("BAD "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
    std::vector<std::string> lines = ReportLines(r.out);
    ASSERT_FALSE(lines.empty());
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines.back(), m, kFinalLine)) << lines.back();
    EXPECT_EQ(m[1], "1");
  }

  void ExpectChunkDamageFound() {
    ExpectFoundEveryTime([&](const nlohmann::json& v, int run) {
      // The first run quarantines a corrupt chunk; from then on it is missing.
      ExpectSharedChunkProblem(v, missing_from_start_ || run > 0);
    });
    for (const std::string& snap : {s1_, s2_}) {
      nlohmann::json v = VerifyJson({snap}, kExitCorruption);
      ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
      EXPECT_EQ(v["problems"][0]["what"], "chunk " + shared_);
      EXPECT_EQ(v["problems"][0]["affected"], nlohmann::json{snap + " disk0.img"});
    }
    EXPECT_EQ(RecordedStates(),
              (std::map<std::string, std::string>{{s1_, "failed"}, {s2_, "failed"}}));
  }

  static constexpr uint64_t kSharedSeed = 500;
  std::string s1_, s2_, shared_, other_;
  std::map<std::string, std::string> chunks_;
  bool missing_from_start_ = false;
};

TEST_F(VerifyLedgerDamageTest, BitFlip) {
  FlipBit(chunks_.at(shared_), 64 + kMiB + 5, 2);
  ExpectChunkDamageFound();
}

TEST_F(VerifyLedgerDamageTest, Truncation) {
  TruncateFile(chunks_.at(shared_), FileSize(chunks_.at(shared_)) / 2);
  ExpectChunkDamageFound();
}

TEST_F(VerifyLedgerDamageTest, MissingChunk) {
  ASSERT_TRUE(fs::remove(chunks_.at(shared_)));
  missing_from_start_ = true;
  ExpectChunkDamageFound();
}

TEST_F(VerifyLedgerDamageTest, ValidChunkUnderTheWrongName) {
  // Another chunk's file, a valid blob of the same size, under S's name.
  WriteFile(chunks_.at(shared_), ReadFile(chunks_.at(other_)));
  ExpectChunkDamageFound();
}

TEST_F(VerifyLedgerDamageTest, CorruptIndex) {
  FlipBit(SnapshotDir(store(), s1_) + "/disk0.img.fidx", 4096 + 32 + 9, 4);  // chunk 1's id
  ExpectFoundEveryTime([&](const nlohmann::json& v, int) {
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    const auto& p = v["problems"][0];
    EXPECT_EQ(p["what"], "index disk0.img.fidx");
    EXPECT_EQ(p["affected"], nlohmann::json{s1_ + " disk0.img"});
    EXPECT_EQ(
        p["dependents"],
        (nlohmann::json{{{"archive", s1_ + " disk0.img"}, {"ranges", nlohmann::json::array()}}}));
    EXPECT_EQ(States(v), (std::map<std::string, std::string>{{s1_, "failed"}, {s2_, "ok"}}));
  });
}

TEST_F(VerifyLedgerDamageTest, CorruptManifest) {
  const std::string manifest = SnapshotDir(store(), s2_) + "/index.json.blob";
  FlipBit(manifest, 64 + (FileSize(manifest) - 64) / 2, 1);
  ExpectFoundEveryTime([&](const nlohmann::json& v, int) {
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
    const auto& p = v["problems"][0];
    EXPECT_EQ(p["what"], "manifest of " + s2_);
    EXPECT_EQ(p["affected"], nlohmann::json{s2_});
    EXPECT_EQ(States(v), (std::map<std::string, std::string>{{s1_, "ok"}, {s2_, "failed"}}));
    // The shared chunk is still checked, for vm/100.
    EXPECT_EQ(v["unique_chunks"], 4);
  });
}

// --- 3. SIGKILL mid-run, then resume ------------------------------------------

class VerifyLedgerResumeTest : public VerifyLedgerTest {
 protected:
  // Kills a slow verify of SCOPE as soon as its first batch of results is
  // wholly in the journal (the size grows as a write copies its pages: wait
  // for all of it, or the kill could tear it). Returns false (and fails the
  // test) when the run finished before that.
  bool KillAfterFirstBatch(const std::vector<std::string>& scope) {
    std::vector<std::string> args = scope;
    // Slow enough (~3 s for the whole store) that the kill lands mid-run:
    // verify journals a batch every 256 chunks or 250 ms, whichever first.
    args.insert(args.end(), {"--inject-latency", "20", "--jobs", "2"});
    RunOptions kill;
    kill.poll = [&](pid_t) {
      std::error_code ec;
      const uint64_t size = fs::file_size(JournalPath(), ec);
      return !ec && size >= kBatchOverhead + kRecord;  // at least one whole batch
    };
    RunResult r = OnStore("verify", args, kill);
    EXPECT_TRUE(r.killed()) << "verify finished before its first batch was journalled: "
                            << r.Describe();
    if (!r.killed()) return false;
    EXPECT_EQ(r.term_signal, SIGKILL);
    return true;
  }

  static constexpr uint64_t kChunks = kVerifyBatch + 40;  // more than one batch
};

TEST_F(VerifyLedgerResumeTest, KilledRunIsResumedBySameScope) {
  Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", kChunks, 41)});
  ASSERT_TRUE(KillAfterFirstBatch({}));

  // What the killed run leaves: its job and at least one whole batch.
  ASSERT_TRUE(Exists(JobPath()));
  nlohmann::json job = ParseJson(ReadFile(JobPath()));
  ASSERT_TRUE(job.is_object());
  const int64_t started = job.value("started", int64_t{0});
  EXPECT_GT(started, 0) << job.dump();
  std::vector<Record> journal = ReadJournal(JournalPath());
  EXPECT_GE(journal.size(), 1u);
  EXPECT_LT(journal.size(), kChunks);
  for (const Record& rec : journal) {
    EXPECT_EQ(rec.verdict, 0);
    EXPECT_GE(rec.time, started);
  }

  nlohmann::json v = VerifyJson({});
  EXPECT_EQ(v["ok"], true);
  EXPECT_EQ(v["resumed_from"], started);
  EXPECT_EQ(v["unique_chunks"], kChunks);
  EXPECT_EQ(v["skipped"]["resumed_chunks"], IdsOf(journal).size());
  EXPECT_EQ(v["skipped"]["resumed_bytes"], IdsOf(journal).size() * kChunk);
  EXPECT_EQ(v["checked_chunks"].get<uint64_t>() + v["skipped"]["resumed_chunks"].get<uint64_t>(),
            kChunks);
  EXPECT_EQ(v["left"]["chunks"], 0);
  EXPECT_EQ(States(v), (std::map<std::string, std::string>{{Snap("vm/100", 1), "ok"}}));
  EXPECT_GE(v["oldest_check"].get<int64_t>(), started);
  // Done: the job is gone and the journal folded into the ledger.
  EXPECT_FALSE(Exists(JobPath()));
  EXPECT_EQ(FileSize(JournalPath()), 0u);
  EXPECT_EQ(ReadLedgerFile(LedgerPath()).size(), kChunks);

  // The next run is a fresh one.
  v = VerifyJson({});
  EXPECT_EQ(v["resumed_from"], 0);
  EXPECT_EQ(v["skipped"]["resumed_chunks"], 0);
  EXPECT_EQ(v["checked_chunks"], kChunks);

  // The human report says what was resumed.
  ASSERT_TRUE(KillAfterFirstBatch({}));
  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("resumed the run started "), std::string::npos) << r.out;
}

TEST_F(VerifyLedgerResumeTest, OtherScopeDoesNotResume) {
  Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", kChunks, 42)});
  Backup("vm/200", 2, {"disk0.img=" + SparseImage("b.raw", 2, 43)});
  ASSERT_TRUE(KillAfterFirstBatch({"vm/100"}));
  // The whole store is another selection: it starts afresh.
  nlohmann::json v = VerifyJson({});
  EXPECT_EQ(v["resumed_from"], 0);
  EXPECT_EQ(v["skipped"]["resumed_chunks"], 0);
  EXPECT_EQ(v["checked_chunks"], kChunks + 2);
  EXPECT_EQ(v["ok"], true);
}

// Verify journals its results 256 chunks at a time (1 GiB of 4 MiB chunks)
// and also every 250 ms, so a slow run (a remote store, here 50 ms a chunk)
// killed after a second keeps most of that second's work. (Before the flush
// by time, such a run journalled nothing and the next one started over.)
TEST_F(VerifyLedgerResumeTest, SlowRunKilledAfterASecondKeepsItsProgress) {
  Backup("vm/100", 1, {"disk0.img=" + SparseImage("a.raw", 40, 44)});
  // Killed a second after the run wrote its job file, i.e. a second into
  // its work: counting from the process start instead made the test depend
  // on how fast a loaded machine (or a sanitizer build) starts a process.
  RunOptions kill;
  std::optional<std::chrono::steady_clock::time_point> started;
  kill.poll = [&](pid_t) {
    auto now = std::chrono::steady_clock::now();
    if (!started) {
      if (Exists(JobPath())) started = now;
      return false;
    }
    return now - *started > std::chrono::seconds(1);
  };
  RunResult r = OnStore("verify", {"--inject-latency", "50", "--jobs", "1"}, kill);
  ASSERT_TRUE(r.killed()) << r.Describe();
  EXPECT_TRUE(Exists(JobPath()));
  EXPECT_GT(FileSize(JournalPath()), 0u) << "nothing of a second's work was journalled";
  nlohmann::json v = VerifyJson({});
  EXPECT_GT(v["resumed_from"].get<int64_t>(), 0);
  EXPECT_GT(v["skipped"]["resumed_chunks"].get<uint64_t>(), 0u);
  EXPECT_EQ(v["checked_chunks"].get<uint64_t>() + v["skipped"]["resumed_chunks"].get<uint64_t>(),
            40u);
}

}  // namespace
}  // namespace cairn::cli_test::verify_ledger_test
