// Every run names its bottleneck (docs/ARCHITECTURE.md, "The stage meter"):
// purpose-made cases whose limit is certain. A slow target (every write
// sleeps 100 ms: --inject-write-latency) must name target writes; a slow
// source (every read sleeps 100 ms, one at a time) must name source reads,
// for restore, rehearse and verify; backup and the JSON report carry the
// per-stage figures, for image and tree archives. The injected sleeps are 20× what a chunk's check
// costs even on a loaded machine, so the verdicts do not depend on speed.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

class BottleneckTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    ImageWriter(Path("d0.raw"), 4 * kChunk, 7).Random(0, 4 * kChunk);
    backup_ = Backup("vm/100", 1, {"disk0.img=" + Path("d0.raw")});
  }

  nlohmann::json RunJson(const std::string& verb, const std::vector<std::string>& args) {
    std::vector<std::string> all = args;
    all.push_back("--json");
    RunResult r = OnStore(verb, all);
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    return ParseJson(r.out);
  }

  // The last line of a human summary.
  static std::string LastLine(const std::string& out) {
    std::string s = out;
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s.substr(s.rfind('\n') + 1);
  }

  // The fields every "bottleneck" object has.
  static void ExpectReport(const nlohmann::json& b) {
    ASSERT_TRUE(b.is_object()) << b.dump();
    for (const char* f : {"stage", "name", "cpu_bound", "line", "seconds", "cpu", "stages"}) {
      EXPECT_TRUE(b.contains(f)) << f << " missing in " << b.dump();
    }
    EXPECT_GE(b["cpu"]["cores"].get<int>(), 1);
    EXPECT_GE(b["cpu"]["share"].get<double>(), 0);
    for (const char* s : {"source_reads", "read_wait", "decode", "hash", "compress",
                          "target_writes", "metadata"}) {
      ASSERT_TRUE(b["stages"].contains(s)) << s << " missing in " << b.dump();
      EXPECT_GE(b["stages"][s]["seconds"].get<double>(), 0) << s;
    }
    EXPECT_TRUE(b["stages"]["source_reads"].contains("reads_in_flight"));
    EXPECT_TRUE(b["stages"]["read_wait"].contains("share"));
  }

  // A slow source's verdict: source reads, the workers waiting for reads
  // longer than they checked or wrote.
  static void ExpectSourceReadsLimited(const nlohmann::json& b) {
    ExpectReport(b);
    EXPECT_EQ(b["stage"], "source_reads") << b.dump(2);
    const nlohmann::json& stages = b["stages"];
    EXPECT_GT(stages["read_wait"]["share"].get<double>(), stages["decode"]["share"].get<double>());
    EXPECT_GT(stages["read_wait"]["share"].get<double>(),
              stages["target_writes"]["share"].get<double>());
  }

  const std::string snap_ = Snap("vm/100", 1);
  nlohmann::json backup_;
};

TEST_F(BottleneckTest, SlowTargetNamesTargetWrites) {
  nlohmann::json j = RunJson("restore", {snap_, "disk0.img", Path("out.img"),
                                         "--inject-write-latency", "100"});
  EXPECT_EQ(CompareFiles(Path("d0.raw"), Path("out.img")), "");
  const nlohmann::json& b = j["bottleneck"];
  ExpectReport(b);
  EXPECT_EQ(b["stage"], "target_writes") << b.dump(2);
  EXPECT_FALSE(b["cpu_bound"].get<bool>()) << b.dump(2);
  // Four 100 ms writes over two or more workers: most of the run.
  EXPECT_GT(b["stages"]["target_writes"]["share"].get<double>(),
            b["stages"]["read_wait"]["share"].get<double>());

  RunResult r = OnStore("restore", {snap_, "disk0.img", Path("out2.img"),
                                    "--inject-write-latency", "100"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: target writes (target writes busy ", 0), 0u)
      << r.out;
}

TEST_F(BottleneckTest, SlowSourceNamesSourceReads) {
  const std::vector<std::string> slow = {"--inject-latency", "100", "--jobs", "1"};
  std::vector<std::string> args = {snap_, "disk0.img", Path("out.img")};
  args.insert(args.end(), slow.begin(), slow.end());
  nlohmann::json j = RunJson("restore", args);
  ExpectSourceReadsLimited(j["bottleneck"]);

  // A rehearsal: the same pipeline, nothing written.
  args = {snap_, "disk0.img", "--rehearse"};
  args.insert(args.end(), slow.begin(), slow.end());
  RunResult r = OnStore("restore", args);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: source reads (reads waited ", 0), 0u) << r.out;

  // Verify reads through the same pipeline.
  args = {};
  args.insert(args.end(), slow.begin(), slow.end());
  j = RunJson("verify", args);
  ExpectReport(j["bottleneck"]);
  EXPECT_EQ(j["bottleneck"]["stage"], "source_reads") << j["bottleneck"].dump(2);
  r = OnStore("verify", args);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: source reads (", 0), 0u) << r.out;
}

TEST_F(BottleneckTest, SlowSourceNamesSourceReadsForSync) {
  // Sync copies through the same pipeline: with a slow source, the copy
  // waits for reads, not for the check on arrival or DST's inserts.
  std::string dst = Path("dst");
  ASSERT_EQ(Cairn({"init", dst}).exit_code, kExitOk);
  RunResult r = Cairn({"sync", "--from", store(), "--to", dst, "--json", "--inject-latency", "100",
                       "--jobs", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json j = ParseJson(r.out);
  ExpectSourceReadsLimited(j["bottleneck"]);
  // The human summary ends with the line; a second sync into another store.
  std::string dst2 = Path("dst2");
  ASSERT_EQ(Cairn({"init", dst2}).exit_code, kExitOk);
  r = Cairn({"sync", "--from", store(), "--to", dst2, "--no-progress", "--inject-latency", "100",
             "--jobs", "1"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: source reads (", 0), 0u) << r.out;
}

TEST_F(BottleneckTest, BackupReportsItsStages) {
  ExpectReport(backup_["bottleneck"]);
  // Four random chunks were hashed, compressed (raw: they do not shrink)
  // and stored.
  const nlohmann::json& stages = backup_["bottleneck"]["stages"];
  EXPECT_GT(stages["hash"]["seconds"].get<double>(), 0) << stages.dump(2);
  EXPECT_GT(stages["target_writes"]["seconds"].get<double>(), 0) << stages.dump(2);
  RunResult r = OnStore("backup", {"--id", "vm/100", "--time", SnapTime(2),
                                   "disk0.img=" + Path("d0.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: ", 0), 0u) << r.out;
}

// gc: the mark reads and decodes the indexes (decode, source reads), the
// sweep lists and stats the chunk directories (metadata) and renames or
// removes garbage (target writes). A second snapshot's chunks are garbage
// once it is forgotten.
TEST_F(BottleneckTest, GcReportsItsStages) {
  ImageWriter(Path("d1.raw"), 2 * kChunk, 9).Random(0, 2 * kChunk);
  Backup("vm/101", 1, {"disk0.img=" + Path("d1.raw")});
  ASSERT_EQ(OnStore("forget", {Snap("vm/101", 1)}).exit_code, kExitOk);
  nlohmann::json j = RunJson("gc", {"--grace", "0", "--threads", "2"});
  EXPECT_EQ(j["removed_chunks"], 2u) << j.dump(2);
  const nlohmann::json& b = j["bottleneck"];
  ExpectReport(b);
  EXPECT_GT(b["stages"]["metadata"]["seconds"].get<double>(), 0) << b.dump(2);
  EXPECT_GT(b["stages"]["target_writes"]["seconds"].get<double>(), 0) << b.dump(2);
  EXPECT_GT(b["stages"]["read_wait"]["seconds"].get<double>() +
                b["stages"]["decode"]["seconds"].get<double>(),
            0)
      << b.dump(2);
  RunResult r = OnStore("gc", {"--grace", "0"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: ", 0), 0u) << r.out;
}

TEST_F(BottleneckTest, TreeBackupReportsItsStages) {
  // A small tree: a subdirectory and three random files of 1 MiB.
  const std::string dir = Path("tree");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0755), 0);
  for (int i = 0; i < 3; ++i) {
    const std::string file = dir + (i == 0 ? "/sub/f" : "/f") + std::to_string(i);
    ImageWriter(file, 1 << 20, 11 + i).Random(0, 1 << 20);
  }
  nlohmann::json j = RunJson("backup", {"--id", "host/t", "--time", SnapTime(1),
                                        "root.tree=" + dir});
  ExpectReport(j["bottleneck"]);
  // The files were read, cut and hashed, the new chunks stored, and the
  // walk read the tree's metadata: every one of those stages was timed.
  const nlohmann::json& stages = j["bottleneck"]["stages"];
  for (const char* s : {"source_reads", "hash", "compress", "target_writes", "metadata"}) {
    EXPECT_GT(stages[s]["seconds"].get<double>(), 0) << s << " in " << stages.dump(2);
  }
  RunResult r = OnStore("backup", {"--id", "host/t", "--time", SnapTime(2),
                                   "root.tree=" + dir});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(LastLine(r.out).rfind("bottleneck: ", 0), 0u) << r.out;
}

// A slow disk under the indexes (every read sleeps 300 ms): the mark's
// reads must be named, not the sweep's 4096 directory listings.
TEST_F(BottleneckTest, GcSlowIndexReadsNameSourceReads) {
  nlohmann::json j = RunJson("gc", {"--grace", "0", "--threads", "2", "--dry-run",
                                    "--inject-read-latency", "300"});
  const nlohmann::json& b = j["bottleneck"];
  ExpectReport(b);
  EXPECT_EQ(b["stage"], "source_reads") << b.dump(2);
  EXPECT_FALSE(b["cpu_bound"].get<bool>()) << b.dump(2);
  EXPECT_EQ(b["line"].get<std::string>().rfind("source reads (reads waited ", 0), 0u) << b.dump(2);
}

}  // namespace
}  // namespace cairn::cli_test
