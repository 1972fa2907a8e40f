// The restore modes of `cairn restore`, part 2 (part 1:
// cli_restore_modes_test.cc): --rehearse, the --memory budget (bytes in
// flight and the child's peak RSS), failures mid-restore, and byte-identical
// results whatever the read concurrency and completion order. Nothing here
// asserts on time or speed.
#include "cli_restore_modes_fixture.h"

namespace cairn::cli_test::restore_modes_test {
namespace {

// --- rehearse --------------------------------------------------------------------

TEST_F(RestoreModesTest, RehearseWritesNothingAndReports) {
  BackupMixed();
  const std::vector<std::string> before = ListDir(tmp_.path());
  std::set<std::string> cwd_before;
  for (const auto& e : std::filesystem::directory_iterator(".")) {
    cwd_before.insert(e.path().filename());
  }

  RunResult r = OnStore("restore", {snap_, "disk0.img", "--rehearse"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> lines = ReportLines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(IsRehearsalLine(lines.back(), "image", "disk0.img", kMixedSize)) << r.out;
  EXPECT_EQ(r.out.find("restore image complete"), std::string::npos) << r.out;

  r = OnStore("restore", {snap_, "--all", "--rehearse"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> finals;
  for (const auto& l : ReportLines(r.out)) {
    if (l.starts_with("rehearsal ")) finals.push_back(l);
  }
  ASSERT_EQ(finals.size(), 2u) << r.out;
  EXPECT_TRUE(IsRehearsalLine(finals[0], "image", "disk0.img", kMixedSize)) << r.out;
  EXPECT_TRUE(IsRehearsalLine(finals[1], "blob", "vm.conf.blob", std::strlen(kConf))) << r.out;

  // A named target and an --all directory are not created either.
  r = OnStore("restore", {snap_, "disk0.img", Path("t"), "--rehearse"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = OnStore("restore", {snap_, "--all", Path("dir"), "--rehearse"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();

  nlohmann::json j = RestoreJson({snap_, "--all", "--rehearse"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["mode"], "rehearse");
  EXPECT_EQ(U(j, "written_bytes"), 0u);
  ASSERT_EQ(j["archives"].size(), 2u) << j.dump();
  const auto& a = j["archives"][0];
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "fetched_bytes"), kMixedFetched);
  EXPECT_EQ(U(a, "chunks_fetched"), kMixedChunksFetched);
  EXPECT_EQ(U(a, "written_bytes"), 0u);
  EXPECT_GT(U(a, "stored_bytes_read"), 0u);
  EXPECT_EQ(U(j["archives"][1], "written_bytes"), 0u);

  EXPECT_EQ(ListDir(tmp_.path()), before) << "a rehearsal wrote into the test directory";
  std::set<std::string> cwd_after;
  for (const auto& e : std::filesystem::directory_iterator(".")) {
    cwd_after.insert(e.path().filename());
  }
  for (const char* name : {"disk0.img", "disk0.img.partial", "vm.conf", "vm.conf.blob"}) {
    if (cwd_before.count(name) == 0) {
      EXPECT_EQ(cwd_after.count(name), 0u) << name << " appeared";
    }
  }
}

TEST_F(RestoreModesTest, RehearseInPlaceReportsWithoutChangingTheTarget) {
  BackupMixed();
  WriteDrifted(Path("drifted"));
  CopyFile(Path("drifted"), Path("drifted.orig"));
  nlohmann::json j = RestoreJson({snap_, "disk0.img", Path("drifted"), "--in-place", "--rehearse"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["mode"], "rehearse");
  const auto& a = j["archives"][0];
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "chunks_fetched"), 2u);
  EXPECT_EQ(U(a, "fetched_bytes"), 2 * kChunk);
  EXPECT_EQ(Skipped(a, "in_place"), kMixedSize - 3 * kChunk);
  EXPECT_EQ(U(a, "written_bytes"), 0u);
  EXPECT_EQ(CompareFiles(Path("drifted.orig"), Path("drifted")), "") << "the target changed";

  // A shorter target is not resized by a rehearsal.
  CopyFile(Path("mixed.raw"), Path("short"));
  TruncateFile(Path("short"), 2 * kChunk);
  j = RestoreJson({snap_, "disk0.img", Path("short"), "--in-place", "--rehearse"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(FileSize(Path("short")), 2 * kChunk);
  ExpectImageAccounting(j["archives"][0]);
  EXPECT_EQ(U(j["archives"][0], "written_bytes"), 0u);
  // Chunks 0 and 1 are there; the rest is missing, so not read.
  EXPECT_EQ(Skipped(j["archives"][0], "in_place"), 2 * kChunk);
  EXPECT_EQ(U(j["archives"][0], "scanned_bytes"), 2 * kChunk) << "scanned_bytes: the bytes read";

  // --rehearse --in-place needs a target to compare with.
  RunResult r = OnStore("restore", {snap_, "disk0.img", "--in-place", "--rehearse"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
}

// --- memory -------------------------------------------------------------------

TEST_F(RestoreModesTest, MemoryBudgetBoundsBytesInFlightAndRss) {
  // 64 MiB and 256 MiB of random data: every chunk distinct and fetched.
  ImageWriter(Path("small.raw"), 16 * kChunk, 301).Random(0, 16 * kChunk);
  ImageWriter(Path("large.raw"), 64 * kChunk, 302).Random(0, 64 * kChunk);
  Backup("vm/100", 1, {"disk0.img=" + Path("small.raw")}, false);
  Backup("vm/100", 2, {"disk0.img=" + Path("large.raw")}, false);

  struct Run {
    uint64_t rss = 0;
    uint64_t peak = 0;
  };
  auto restore = [&](int t, const std::string& source, const std::string& target) {
    Run run;
    // The child's peak RSS includes what the test process holds at fork:
    // hand freed heap back first.
    ::malloc_trim(0);
    RunResult r = OnStore("restore", {Snap("vm/100", t), "disk0.img", target, "--memory", "16M",
                                      "--json"});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    if (r.exit_code != kExitOk) return run;
    nlohmann::json j = ParseJson(r.out);
    EXPECT_EQ(U(j, "memory_limit_bytes"), 16 * kMiB);
    run.peak = U(j, "peak_bytes_in_flight");
    run.rss = r.peak_rss_bytes;
    EXPECT_GT(run.peak, 0u);
    EXPECT_LE(run.peak, 16 * kMiB + 8 * kMiB) << j.dump();
    EXPECT_EQ(CompareFiles(source, target), "");
    std::filesystem::remove(target);
    return run;
  };
  Run small = restore(1, Path("small.raw"), Path("small.out"));
  Run large = restore(2, Path("large.raw"), Path("large.out"));
  const std::string info = "peak RSS 64 MiB image: " + std::to_string(small.rss >> 20) +
                           " MiB, 256 MiB image: " + std::to_string(large.rss >> 20) +
                           " MiB; test process RSS " + std::to_string(SelfRss() >> 20) + " MiB";
  RecordProperty("rss_small_mib", std::to_string(small.rss >> 20));
  RecordProperty("rss_large_mib", std::to_string(large.rss >> 20));
  EXPECT_GT(small.rss, 0u) << info;
  // Sanitizers add shadow memory and quarantines: RSS means nothing there
  // (the bytes-in-flight bound above still holds).
  const bool rss_meaningful = !CairnSanitized();
  if (rss_meaningful) {
    EXPECT_LT(small.rss, 200 * kMiB) << info;
    EXPECT_LT(large.rss, 200 * kMiB) << info;
    // Bounded by the budget, not the image size.
    EXPECT_LT(large.rss, small.rss + 40 * kMiB) << info;
  }

  // The in-order restore to stdout keeps to the budget too.
  StreamComparer stream(Path("large.raw"));
  RunOptions sink;
  sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
  ::malloc_trim(0);
  RunResult r = OnStore("restore", {Snap("vm/100", 2), "disk0.img", "-", "--memory", "16M"}, sink);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(stream.Result(), "");
  if (rss_meaningful) {
    EXPECT_LT(r.peak_rss_bytes, small.rss + 40 * kMiB)
        << info << "; to stdout: " << (r.peak_rss_bytes >> 20) << " MiB";
  }
}

// --- errors mid-restore -------------------------------------------------------

TEST_F(RestoreModesTest, CorruptChunkFailsAndLeavesNoTarget) {
  BackupMixed();
  const std::string chunk = ChunkFileAt(snap_, "disk0.img", 4);  // random, unique
  FlipBit(chunk, FileSize(chunk) / 2, 3);

  for (bool json : {false, true}) {
    SCOPED_TRACE(json ? "--json" : "text");
    const std::string target = Path(json ? "t-json" : "t-text");
    std::vector<std::string> args = {snap_, "disk0.img", target};
    if (json) args.push_back("--json");
    RunResult r = OnStore("restore", args);
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
    EXPECT_FALSE(Exists(target));
    EXPECT_FALSE(Exists(target + ".partial"));
  }
  // Rehearsal: the same verdict.
  RunResult r = OnStore("restore", {snap_, "disk0.img", "--rehearse"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
  r = OnStore("restore", {snap_, "--all", "--rehearse"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  // --all: no image left in the directory.
  r = OnStore("restore", {snap_, "--all", Path("all")});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(Path("all/disk0.img")));
  EXPECT_FALSE(Exists(Path("all/disk0.img.partial")));
  // In place onto a drifted copy that needs the bad chunk.
  WriteDrifted(Path("drifted"));
  r = OnStore("restore", {snap_, "disk0.img", Path("drifted"), "--in-place"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
  // With latency and many reads in flight: same result.
  r = OnStore("restore",
              {snap_, "disk0.img", Path("t-lat"), "--jobs", "16", "--inject-latency", "2:2"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_FALSE(Exists(Path("t-lat")));
  EXPECT_FALSE(Exists(Path("t-lat.partial")));
}

TEST_F(RestoreModesTest, MissingChunkFailsAndLeavesNoTarget) {
  BackupMixed();
  std::filesystem::remove(ChunkFileAt(snap_, "disk0.img", 1));  // the text chunk
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--jobs", "1"},
        std::vector<std::string>{"--inject-latency", "2:2"}}) {
    const std::string target = Path("t" + std::to_string(extra.size()));
    std::vector<std::string> args = {snap_, "disk0.img", target};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = OnStore("restore", args);
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
    EXPECT_FALSE(Exists(target));
    EXPECT_FALSE(Exists(target + ".partial"));
  }
  RunResult r = OnStore("restore", {snap_, "disk0.img", "--rehearse"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
}

// A failed --all must not leave new files behind either: not the images
// (checked above) and not the blobs, which are restored first.
TEST_F(RestoreModesTest, FailedAllLeavesNoNewFiles) {
  BackupMixed();
  // An image target already there (no --overwrite): refused, exit 1.
  std::filesystem::create_directories(Path("exists"));
  WriteFile(Path("exists/disk0.img"), "precious");
  RunResult r = OnStore("restore", {snap_, "--all", Path("exists")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(ReadFile(Path("exists/disk0.img")), "precious");
  EXPECT_EQ(ListDir(Path("exists")), std::vector<std::string>{"disk0.img"})
      << "the blob was written although the restore failed";

  // A corrupted chunk: exit 3, and nothing new in the directory.
  const std::string chunk = ChunkFileAt(snap_, "disk0.img", 4);
  FlipBit(chunk, FileSize(chunk) / 2, 3);
  r = OnStore("restore", {snap_, "--all", Path("all")});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  if (Exists(Path("all"))) {
    EXPECT_EQ(ListDir(Path("all")), std::vector<std::string>{})
        << "a failed restore --all left files behind";
  }
}

// --- concurrency and completion order ---------------------------------------------

TEST_F(RestoreModesTest, JobsAndLatencyGiveIdenticalResults) {
  // 8 chunks and a tail: random, text, duplicates, explicit zeros, a chunk
  // half hole and half random.
  const uint64_t size = 8 * kChunk + 777;
  ImageWriter(Path("src.raw"), size, 401)
      .Random(0, 3 * kChunk)
      .Copy(0, 3 * kChunk, kChunk)
      .Zeros(4 * kChunk, kChunk)
      .Text(5 * kChunk, kChunk)
      .Random(6 * kChunk + kMiB, kMiB)
      .Copy(5 * kChunk, 7 * kChunk, kChunk)
      .Random(8 * kChunk, 777);
  ImageWriter(Path("src2.raw"), 3 * kChunk, 402).Random(kChunk, 2 * kChunk);
  Backup("vm/100", 1, {"disk0.img=" + Path("src.raw"), "disk1.img=" + Path("src2.raw")}, false);
  const std::string snap = Snap("vm/100", 1);

  struct Variant {
    std::string name;
    std::vector<std::string> flags;
  };
  const std::vector<Variant> variants = {
      {"jobs1", {"--jobs", "1"}},
      {"jobs16", {"--jobs", "16"}},
      {"latency", {"--inject-latency", "2:2"}},
      {"latency-jobs16", {"--inject-latency", "2:2", "--jobs", "16"}},
  };
  nlohmann::json first;
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    std::vector<std::string> args = {snap, "disk0.img", Path(v.name)};
    args.insert(args.end(), v.flags.begin(), v.flags.end());
    nlohmann::json j = RestoreJson(args);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(CompareFiles(Path("src.raw"), Path(v.name)), "");
    const bool pinned = std::find(v.flags.begin(), v.flags.end(), "--jobs") != v.flags.end();
    EXPECT_EQ(j["jobs"]["mode"], pinned ? "fixed" : "auto");
    if (pinned) {  // a pinned limit is what the report says
      const uint64_t n = std::stoull(*(std::find(v.flags.begin(), v.flags.end(), "--jobs") + 1));
      EXPECT_EQ(U(j["jobs"], "final"), n) << j.dump();
      EXPECT_EQ(U(j["jobs"], "max"), n) << j.dump();
    }
    nlohmann::json a = j["archives"][0];
    ExpectImageAccounting(a);
    // The accounting does not depend on the order chunks completed in.
    for (const char* k : {"seconds", "mib_per_s", "target"}) a.erase(k);
    if (first.is_null()) {
      first = a;
      EXPECT_EQ(U(a, "chunks_fetched"), 6u);  // 0-2, the text and half-random chunks, the tail
      EXPECT_EQ(Skipped(a, "dedup"), 2 * kChunk);
      EXPECT_EQ(Skipped(a, "zero"), kChunk);
    } else {
      EXPECT_EQ(a, first);
    }

    // To stdout and both images at once with the same flags.
    RunResult r;
    StreamComparer stream(Path("src.raw"));
    RunOptions sink;
    sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
    args = {snap, "disk0.img", "-", "--memory", "16M"};
    args.insert(args.end(), v.flags.begin(), v.flags.end());
    r = OnStore("restore", args, sink);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(stream.Result(), "") << "to stdout";

    const std::string dir = Path(v.name + ".all");
    args = {snap, "--all", dir, "--memory", "16M"};
    args.insert(args.end(), v.flags.begin(), v.flags.end());
    r = OnStore("restore", args);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(Path("src.raw"), dir + "/disk0.img"), "");
    EXPECT_EQ(CompareFiles(Path("src2.raw"), dir + "/disk1.img"), "");
    std::filesystem::remove_all(dir);
    std::filesystem::remove(Path(v.name));
  }

  // Over an existing file of garbage, with completion order shuffled.
  ImageWriter(Path("over"), size + kMiB, 9).Fill(0, size + kMiB, 0xee);
  RunResult r = OnStore("restore", {snap, "disk0.img", Path("over"), "--overwrite", "--jobs", "16",
                                    "--inject-latency", "2:2"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("src.raw"), Path("over")), "");
}

}  // namespace
}  // namespace cairn::cli_test::restore_modes_test
