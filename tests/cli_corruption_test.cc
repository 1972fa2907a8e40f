// Fault injection on the stored data: every kind of damage must be found by
// verify (exit 3, naming what is broken and which snapshot and archive need
// it) and by restore (non-zero exit, no target left behind), the damaged
// snapshot must show as FAILED, and a healthy sibling must stay ok.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// The damaged snapshot (vm/100 at t=1) holds disk0.img and vm.conf.blob;
// the healthy sibling (vm/200 at t=2) shares no chunk with it but the zero
// chunk.
constexpr int kBadTime = 1;
constexpr int kGoodTime = 2;

class CorruptionTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    if (HasFatalFailure()) return;
    // disk0.img: chunk 0 random (stored raw), chunk 1 text (stored zstd),
    // chunk 2 a hole, chunk 3 a short random tail.
    ImageWriter(Path("a.raw"), 3 * kChunk + kMiB, 21)
        .Random(0, kChunk)
        .Text(kChunk, kChunk)
        .Random(3 * kChunk, kMiB);
    ImageWriter(Path("b.raw"), 3 * kChunk, 22).Random(0, kChunk).Text(2 * kChunk, kChunk);
    WriteFile(Path("vm.conf"), "memory: 2048\ncores: 2\nnet0: virtio=AA:BB:CC:DD:EE:FF\n");
    Backup("vm/100", kBadTime, {"disk0.img=" + Path("a.raw"), "vm.conf.blob=" + Path("vm.conf")});
    Backup("vm/200", kGoodTime, {"disk0.img=" + Path("b.raw")});
    bad_snap_ = Snap("vm/100", kBadTime);
    good_snap_ = Snap("vm/200", kGoodTime);
    bad_dir_ = SnapshotDir(store(), bad_snap_);
    ids_ = IndexDigests(bad_dir_ + "/disk0.img.fidx");
    ASSERT_EQ(ids_.size(), 4u);
    chunk_files_ = ChunkFiles(store());
    ASSERT_TRUE(chunk_files_.count(ids_[0]) && chunk_files_.count(ids_[1]) &&
                chunk_files_.count(ids_[3]));
    // That this store verifies clean before any damage is checked once, in
    // CleanStoreVerifies.
  }

  std::string ChunkPath(size_t i) { return chunk_files_.at(ids_.at(i)); }

  // Verify of the snapshot alone and of the whole store (as JSON): exit 3,
  // and the output names every needle (chunk id, file) plus the snapshot
  // and, when given, the archive. `snapshots` agrees: the damaged snapshot
  // failed, the sibling is ok.
  void ExpectVerifyFinds(const std::vector<std::string>& needles, const std::string& archive) {
    RunResult r = OnStore("verify", {bad_snap_});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    const std::string all = r.out + r.err;
    for (const auto& n : needles) EXPECT_NE(all.find(n), std::string::npos) << n << "\n" << all;
    EXPECT_NE(all.find(bad_snap_), std::string::npos) << all;
    if (!archive.empty()) {
      EXPECT_NE(all.find(archive), std::string::npos) << all;
    }
    EXPECT_NE(all.find("FAILED"), std::string::npos) << all;

    // The whole store, as JSON.
    r = OnStore("verify", {"--json"});
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    nlohmann::json v = ParseJson(r.out);
    ASSERT_TRUE(v.is_object()) << r.Describe();
    EXPECT_EQ(v["ok"], false);
    ASSERT_GE(v["problems"].size(), 1u);
    std::string problems = v["problems"].dump();
    for (const auto& n : needles) EXPECT_NE(problems.find(n), std::string::npos) << problems;
    EXPECT_NE(problems.find(bad_snap_), std::string::npos) << problems;
    EXPECT_EQ(problems.find(good_snap_), std::string::npos) << problems;
    std::map<std::string, std::string> state;
    for (const auto& s : v["snapshots"]) {
      state[s["snapshot"].get<std::string>()] = s["state"].get<std::string>();
    }
    EXPECT_EQ(state[bad_snap_], "failed");
    EXPECT_EQ(state[good_snap_], "ok");

    // The outcome is recorded with each snapshot.
    nlohmann::json snaps = SnapshotsJson();
    ASSERT_TRUE(snaps.is_array());
    std::map<std::string, std::string> listed;
    for (const auto& s : snaps) {
      ASSERT_TRUE(s["verify"].is_object()) << s.dump();
      listed[s["snapshot"].get<std::string>()] = s["verify"]["state"].get<std::string>();
    }
    EXPECT_EQ(listed[bad_snap_], "failed");
    EXPECT_EQ(listed[good_snap_], "ok");
    r = OnStore("snapshots", {});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;

    // The sibling alone still verifies clean.
    r = OnStore("verify", {good_snap_});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  }

  // Restoring `archive` of the damaged snapshot fails to a new file (which
  // is not left behind) and to stdout; the sibling still restores.
  void ExpectRestoreFails(const std::string& archive) {
    const std::string target = Path("restored-" + archive);
    RunResult r = OnStore("restore", {bad_snap_, archive, target});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
    EXPECT_NE(r.err.find("error"), std::string::npos) << r.Describe();
    EXPECT_FALSE(Exists(target)) << "a failed restore left its target";
    EXPECT_FALSE(Exists(target + ".partial")) << "a failed restore left its partial file";

    r = OnStore("restore", {bad_snap_, archive, "-"});
    EXPECT_NE(r.exit_code, kExitOk) << "restore to stdout of damaged data must fail";

    r = OnStore("restore", {good_snap_, "disk0.img", Path("sibling.raw")});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(Path("b.raw"), Path("sibling.raw")), "");
  }

  void ExpectChunkDamageFound(size_t chunk) {
    ExpectVerifyFinds({ids_[chunk]}, "disk0.img");
    ExpectRestoreFails("disk0.img");
  }

  std::string bad_snap_, good_snap_, bad_dir_;
  std::vector<std::string> ids_;  // chunk ids of disk0.img
  std::map<std::string, std::string> chunk_files_;
};

TEST_F(CorruptionTest, CleanStoreVerifies) {
  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.out.find("all ok"), std::string::npos) << r.Describe();
  r = OnStore("restore", {bad_snap_, "disk0.img", Path("a-back.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), Path("a-back.raw")), "");
}

TEST_F(CorruptionTest, ChunkTruncated) {
  TruncateFile(ChunkPath(0), FileSize(ChunkPath(0)) / 2);
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, ChunkTruncatedInsideHeader) {
  TruncateFile(ChunkPath(0), 40);
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, ChunkTruncatedToZeroBytes) {
  TruncateFile(ChunkPath(1), 0);
  ExpectChunkDamageFound(1);
}

TEST_F(CorruptionTest, ChunkPayloadBitFlipped) {
  FlipBit(ChunkPath(0), 64 + kMiB + 3, 5);
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, CompressedChunkPayloadBitFlipped) {
  const uint64_t size = FileSize(ChunkPath(1));
  ASSERT_LT(size, kChunk / 2) << "the text chunk should be stored compressed";
  FlipBit(ChunkPath(1), 64 + (size - 64) / 2, 0);
  ExpectChunkDamageFound(1);
}

TEST_F(CorruptionTest, ChunkHeaderBitFlipped) {
  FlipBit(ChunkPath(0), 17, 2);  // raw_size
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, ChunkMagicBitFlipped) {
  FlipBit(ChunkPath(3), 0, 1);
  ExpectChunkDamageFound(3);
}

TEST_F(CorruptionTest, ChunkMissing) {
  ASSERT_TRUE(std::filesystem::remove(ChunkPath(0)));
  ExpectChunkDamageFound(0);
  RunResult r = OnStore("verify", {"--json"});
  nlohmann::json v = ParseJson(r.out);
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v["problems"].size(), 1u);
  EXPECT_EQ(v["problems"][0]["missing"], true);
}

TEST_F(CorruptionTest, ChunkReplacedByValidBlobOfDifferentSize) {
  // The 1 MiB tail chunk's file, a valid blob, in place of a 4 MiB chunk.
  WriteFile(ChunkPath(0), ReadFile(ChunkPath(3)));
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, ChunkReplacedByValidBlobOfSameSize) {
  // Another valid 4 MiB random chunk (from the sibling) under this id.
  std::vector<std::string> sibling =
      IndexDigests(SnapshotDir(store(), good_snap_) + "/disk0.img.fidx");
  ASSERT_EQ(sibling.size(), 3u);
  WriteFile(ChunkPath(0), ReadFile(chunk_files_.at(sibling[0])));
  ExpectChunkDamageFound(0);
}

TEST_F(CorruptionTest, IndexTruncated) {
  const std::string fidx = bad_dir_ + "/disk0.img.fidx";
  TruncateFile(fidx, FileSize(fidx) - 32);
  ExpectVerifyFinds({"disk0.img.fidx"}, "disk0.img");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, IndexTruncatedInsideHeader) {
  TruncateFile(bad_dir_ + "/disk0.img.fidx", 100);
  ExpectVerifyFinds({"disk0.img.fidx"}, "disk0.img");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, IndexDigestBitFlipped) {
  FlipBit(bad_dir_ + "/disk0.img.fidx", 4096 + 32 + 7, 3);  // chunk 1's id
  ExpectVerifyFinds({"disk0.img.fidx"}, "disk0.img");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, IndexHeaderBitFlipped) {
  FlipBit(bad_dir_ + "/disk0.img.fidx", 18, 4);  // image size
  ExpectVerifyFinds({"disk0.img.fidx"}, "disk0.img");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, ManifestBitFlipped) {
  const std::string manifest = bad_dir_ + "/index.json.blob";
  FlipBit(manifest, 64 + (FileSize(manifest) - 64) / 2, 6);
  ExpectVerifyFinds({"manifest"}, "");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, ManifestTruncated) {
  const std::string manifest = bad_dir_ + "/index.json.blob";
  TruncateFile(manifest, FileSize(manifest) - 10);
  ExpectVerifyFinds({"manifest"}, "");
  ExpectRestoreFails("disk0.img");
}

TEST_F(CorruptionTest, ManifestTruncatedToZeroBytes) {
  TruncateFile(bad_dir_ + "/index.json.blob", 0);
  ExpectVerifyFinds({"manifest"}, "");
  ExpectRestoreFails("vm.conf.blob");
}

TEST_F(CorruptionTest, BlobArchiveBitFlipped) {
  const std::string blob = bad_dir_ + "/vm.conf.blob";
  FlipBit(blob, FileSize(blob) - 3, 1);
  ExpectVerifyFinds({"vm.conf.blob"}, "vm.conf.blob");
  ExpectRestoreFails("vm.conf.blob");
  // The image archive of the same snapshot is intact and still restores.
  RunResult r = OnStore("restore", {bad_snap_, "disk0.img", Path("a-back.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), Path("a-back.raw")), "");
}

TEST_F(CorruptionTest, BlobArchiveTruncated) {
  const std::string blob = bad_dir_ + "/vm.conf.blob";
  TruncateFile(blob, FileSize(blob) - 1);
  ExpectVerifyFinds({"vm.conf.blob"}, "vm.conf.blob");
  ExpectRestoreFails("vm.conf.blob");
}

TEST_F(CorruptionTest, DamagedChunkSharedBySnapshotsFailsEachOfThem) {
  // A second snapshot of vm/100 reuses every chunk: one bad chunk fails both,
  // and verify reports it once, naming both.
  Backup("vm/100", 3, {"disk0.img=" + Path("a.raw")});
  FlipBit(ChunkPath(1), 100, 0);
  RunResult r = OnStore("verify", {"--json"});
  EXPECT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  nlohmann::json v = ParseJson(r.out);
  ASSERT_TRUE(v.is_object());
  ASSERT_EQ(v["problems"].size(), 1u) << v.dump();
  const auto& affected = v["problems"][0]["affected"];
  EXPECT_EQ(affected.size(), 2u) << v.dump();
  std::string text = affected.dump();
  EXPECT_NE(text.find(bad_snap_ + " disk0.img"), std::string::npos) << text;
  EXPECT_NE(text.find(Snap("vm/100", 3) + " disk0.img"), std::string::npos) << text;
  for (const auto& s : v["snapshots"]) {
    EXPECT_EQ(s["state"], s["snapshot"] == good_snap_ ? "ok" : "failed") << s.dump();
  }
}

// After verify has found a damaged chunk, a new backup of the same data must
// not reference the damaged copy: verify quarantines it (<id>.bad), the
// failed snapshot is not the dedup base, so the backup stores it again.
TEST_F(CorruptionTest, BackupAfterDetectedDamageStoresTheChunkAgain) {
  FlipBit(ChunkPath(0), 64 + 1000, 2);
  RunResult r = OnStore("verify", {});
  ASSERT_EQ(r.exit_code, kExitCorruption) << r.Describe();
  EXPECT_NE(r.out.find("quarantined"), std::string::npos) << r.Describe();
  Backup("vm/100", 3, {"disk0.img=" + Path("a.raw")});
  r = OnStore("verify", {Snap("vm/100", 3)});
  EXPECT_EQ(r.exit_code, kExitOk) << "the new snapshot reuses the damaged chunk: " << r.Describe();
  r = OnStore("restore", {Snap("vm/100", 3), "disk0.img", Path("healed.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), Path("healed.raw")), "");
}

}  // namespace
}  // namespace cairn::cli_test
