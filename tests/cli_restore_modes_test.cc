// The restore modes of `cairn restore` (issue "Parallel restore"): the final
// line per archive, the JSON byte accounting, --all into a directory with
// chunks shared between images fetched once, --in-place onto files and
// block devices, --rehearse, the --memory budget (bytes in flight and the
// child's peak RSS), failures mid-restore, and byte-identical results
// whatever the read concurrency and completion order.
//
// Nothing here asserts on time or speed. This file: output, --all, --in-place
// onto files and block devices; cli_restore_rehearse_test.cc: --rehearse,
// --memory, failures mid-restore, completion order; the fixture:
// cli_restore_modes_fixture.h.
#include "cli_restore_modes_fixture.h"

namespace cairn::cli_test::restore_modes_test {
namespace {

// --- output ---------------------------------------------------------------

TEST_F(RestoreModesTest, FinalLinePerArchive) {
  BackupMixed();
  RunResult r = OnStore("restore", {snap_, "disk0.img", Path("d0")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> lines = ReportLines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_TRUE(IsCompleteLine(lines.back(), "image", kMixedSize)) << r.out;
  EXPECT_TRUE(lines[lines.size() - 2].starts_with("restored disk0.img:")) << r.out;
  EXPECT_NE(r.out.find("\nbottleneck: "), std::string::npos) << r.out;  // and then the limit
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("d0")), "");

  r = OnStore("restore", {snap_, "vm.conf.blob", Path("conf")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  lines = ReportLines(r.out);
  ASSERT_GE(lines.size(), 1u) << r.out;
  EXPECT_TRUE(IsCompleteLine(lines.back(), "blob", std::strlen(kConf))) << r.out;
  EXPECT_EQ(ReadFile(Path("conf")), kConf);

  // --all: one final line per archive, in manifest order.
  r = OnStore("restore", {snap_, "--all", Path("all")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> finals;
  for (const auto& l : ReportLines(r.out)) {
    if (l.find(" complete (") != std::string::npos) finals.push_back(l);
  }
  ASSERT_EQ(finals.size(), 2u) << r.out;
  EXPECT_TRUE(IsCompleteLine(finals[0], "image", kMixedSize)) << r.out;
  EXPECT_TRUE(IsCompleteLine(finals[1], "blob", std::strlen(kConf))) << r.out;

  // To stdout the data is all stdout carries; the summary goes to stderr.
  StreamComparer stream(Path("mixed.raw"));
  RunOptions sink;
  sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
  r = OnStore("restore", {snap_, "disk0.img", "-"}, sink);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(stream.Result(), "");
  lines = ReportLines(r.err);
  ASSERT_GE(lines.size(), 1u) << r.err;
  EXPECT_TRUE(IsCompleteLine(lines.back(), "image", kMixedSize)) << r.err;
}

TEST_F(RestoreModesTest, JsonByteAccounting) {
  BackupMixed();
  nlohmann::json j = RestoreJson({snap_, "disk0.img", Path("d0")});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("d0")), "");
  EXPECT_EQ(j["mode"], "restore");
  EXPECT_EQ(j["snapshot"], snap_);
  EXPECT_EQ(U(j, "memory_limit_bytes"), 256 * kMiB) << "the default --memory";
  EXPECT_LE(U(j, "peak_bytes_in_flight"), 256 * kMiB + kChunk);
  ASSERT_TRUE(j["jobs"].is_object()) << j.dump();
  EXPECT_EQ(j["jobs"]["mode"], "auto");
  EXPECT_GE(U(j["jobs"], "final"), 1u);
  EXPECT_GE(U(j["jobs"], "max"), U(j["jobs"], "final"));
  EXPECT_GT(j["jobs"]["mean"].get<double>(), 0);
  ASSERT_TRUE(j["archives"].is_array() && j["archives"].size() == 1) << j.dump();
  const auto& a = j["archives"][0];
  for (const char* f : {"archive", "kind", "target", "bytes", "seconds", "fetched_bytes",
                        "chunks_fetched", "stored_bytes_read", "written_bytes", "scanned_bytes",
                        "skipped_bytes", "zero_chunks"}) {
    EXPECT_TRUE(a.contains(f)) << "missing \"" << f << "\" in " << a.dump();
  }
  EXPECT_EQ(a["archive"], "disk0.img");
  EXPECT_EQ(a["target"], Path("d0"));
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "bytes"), kMixedSize);
  EXPECT_EQ(U(a, "fetched_bytes"), kMixedFetched);
  EXPECT_EQ(U(a, "chunks_fetched"), kMixedChunksFetched);
  EXPECT_EQ(Skipped(a, "zero"), kMixedZero);
  EXPECT_EQ(U(a, "zero_chunks"), 2u);
  EXPECT_EQ(Skipped(a, "dedup"), kMixedDedup);
  EXPECT_EQ(Skipped(a, "in_place"), 0u);
  EXPECT_EQ(U(a, "scanned_bytes"), 0u);
  EXPECT_GT(U(a, "stored_bytes_read"), 0u);
  // A new file: zero chunks stay holes, everything else is written.
  EXPECT_EQ(U(a, "written_bytes"), kMixedSize - kMixedZero);
  // Totals are the sums.
  EXPECT_EQ(U(j, "bytes"), kMixedSize);
  EXPECT_EQ(U(j, "fetched_bytes"), kMixedFetched);
  EXPECT_EQ(U(j, "written_bytes"), U(a, "written_bytes"));
  EXPECT_EQ(j["skipped_bytes"], a["skipped_bytes"]);

  // --overwrite onto an existing file writes the zeros too.
  ImageWriter(Path("garbage"), kMixedSize - 3, 5).Fill(0, kMixedSize - 3, 0x5a);
  j = RestoreJson({snap_, "disk0.img", Path("garbage"), "--overwrite"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("garbage")), "");
  ExpectImageAccounting(j["archives"][0]);
  EXPECT_EQ(U(j["archives"][0], "written_bytes"), kMixedSize);
  EXPECT_EQ(j["mode"], "restore");

  // A blob in --all: kind blob, bytes, written.
  j = RestoreJson({snap_, "--all", Path("all")});
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["archives"].size(), 2u) << j.dump();
  ExpectImageAccounting(j["archives"][0]);
  const auto& blob = j["archives"][1];
  EXPECT_EQ(blob["archive"], "vm.conf.blob");
  EXPECT_EQ(blob["kind"], "blob");
  EXPECT_EQ(blob["target"], Path("all") + "/vm.conf");
  EXPECT_EQ(U(blob, "bytes"), std::strlen(kConf));
  EXPECT_EQ(U(blob, "written_bytes"), std::strlen(kConf));
  EXPECT_EQ(U(j, "bytes"), kMixedSize + std::strlen(kConf));
}

// --- --all ------------------------------------------------------------------

TEST_F(RestoreModesTest, AllRestoresEveryArchiveAndFetchesSharedChunksOnce) {
  // disk0: R0 T1 hole R2 ; disk1: R0 R3 T1 tail. R0 and T1 are shared.
  ImageWriter(Path("d0.raw"), 4 * kChunk, 201)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)
      .Random(3 * kChunk, kChunk);
  {
    ImageWriter d1(Path("d1.raw"), 3 * kChunk + kTail, 202);
    d1.Random(kChunk, kChunk).Random(3 * kChunk, kTail);
  }
  // Copy R0 and T1 into disk1 (chunk-aligned: same ids).
  {
    std::string d0 = ReadRange(Path("d0.raw"), 0, 2 * kChunk);
    int fd = ::open(Path("d1.raw").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, d0.data(), kChunk, 0), static_cast<ssize_t>(kChunk));
    ASSERT_EQ(::pwrite(fd, d0.data() + kChunk, kChunk, 2 * kChunk), static_cast<ssize_t>(kChunk));
    ::close(fd);
  }
  WriteFile(Path("vm.conf"), kConf);
  Backup("vm/100", 1,
         {"disk0.img=" + Path("d0.raw"), "disk1.img=" + Path("d1.raw"),
          "vm.conf.blob=" + Path("vm.conf")},
         false);
  const std::string snap = Snap("vm/100", 1);
  const std::string dir = Path("out/nested");  // created, parents too

  nlohmann::json j = RestoreJson({snap, "--all", dir});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(ListDir(dir), (std::vector<std::string>{"disk0.img", "disk1.img", "vm.conf"}));
  EXPECT_EQ(CompareFiles(Path("d0.raw"), dir + "/disk0.img"), "");
  EXPECT_EQ(CompareFiles(Path("d1.raw"), dir + "/disk1.img"), "");
  EXPECT_EQ(ReadFile(dir + "/vm.conf"), kConf);

  ASSERT_EQ(j["archives"].size(), 3u) << j.dump();
  const auto& a0 = j["archives"][0];
  const auto& a1 = j["archives"][1];
  EXPECT_EQ(a0["target"], dir + "/disk0.img");
  EXPECT_EQ(a1["target"], dir + "/disk1.img");
  EXPECT_EQ(j["archives"][2]["target"], dir + "/vm.conf");
  ExpectImageAccounting(a0);
  ExpectImageAccounting(a1);
  // Five distinct non-zero chunks, each fetched once: R0 T1 R2 by disk0,
  // R3 and the tail by disk1, whose R0 and T1 are dedup.
  EXPECT_EQ(U(j, "chunks_fetched"), 5u);
  EXPECT_EQ(U(j, "fetched_bytes"), 4 * kChunk + kTail);
  EXPECT_EQ(U(a0, "fetched_bytes"), 3 * kChunk);
  EXPECT_EQ(Skipped(a0, "dedup"), 0u);
  EXPECT_EQ(Skipped(a0, "zero"), kChunk);
  EXPECT_EQ(U(a1, "fetched_bytes"), kChunk + kTail);
  EXPECT_EQ(Skipped(a1, "dedup"), 2 * kChunk);
  EXPECT_EQ(Skipped(a1, "zero"), 0u);
  EXPECT_LE(U(j, "peak_bytes_in_flight"), U(j, "memory_limit_bytes") + kChunk);

  // Again into the same directory: the targets exist.
  RunResult r = OnStore("restore", {snap, "--all", dir});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("d0.raw"), dir + "/disk0.img"), "");

  // --all with no directory, or onto a regular file: usage errors.
  r = OnStore("restore", {snap, "--all"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  WriteFile(Path("plain"), "not a directory");
  r = OnStore("restore", {snap, "--all", Path("plain")});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
  EXPECT_EQ(ReadFile(Path("plain")), "not a directory");
  EXPECT_FALSE(Exists(Path("plain.partial")));

  // --all --in-place onto the restored directory after drift in disk1's
  // shared chunk T1 (position 2): only that chunk is fetched and written.
  WriteRandomAt(dir + "/disk1.img", 2 * kChunk + 77, 5, 9);
  j = RestoreJson({snap, "--all", dir, "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["mode"], "in-place");
  EXPECT_EQ(CompareFiles(Path("d1.raw"), dir + "/disk1.img"), "");
  EXPECT_EQ(CompareFiles(Path("d0.raw"), dir + "/disk0.img"), "");
  ASSERT_EQ(j["archives"].size(), 3u) << j.dump();
  ExpectImageAccounting(j["archives"][0]);
  ExpectImageAccounting(j["archives"][1]);
  EXPECT_EQ(U(j, "chunks_fetched"), 1u);
  EXPECT_EQ(U(j, "fetched_bytes"), kChunk);
  EXPECT_EQ(U(j["archives"][0], "written_bytes"), 0u);
  EXPECT_EQ(U(j["archives"][1], "written_bytes"), kChunk);
  EXPECT_EQ(Skipped(j["archives"][0], "in_place"), 4 * kChunk);
  EXPECT_EQ(Skipped(j["archives"][1], "in_place"), 2 * kChunk + kTail);
}

// --- in place ----------------------------------------------------------------

TEST_F(RestoreModesTest, InPlaceOntoIdenticalCopyFetchesNothing) {
  BackupMixed();
  CopyFile(Path("mixed.raw"), Path("copy"));
  // Nothing should be read from the store: take every chunk away.
  for (const auto& [id, path] : ChunkFiles(store())) std::filesystem::remove(path);
  nlohmann::json j = RestoreJson({snap_, "disk0.img", Path("copy"), "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["mode"], "in-place");
  const auto& a = j["archives"][0];
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "fetched_bytes"), 0u);
  EXPECT_EQ(U(a, "chunks_fetched"), 0u);
  EXPECT_EQ(U(a, "written_bytes"), 0u);
  EXPECT_EQ(Skipped(a, "in_place"), kMixedSize);
  EXPECT_EQ(U(a, "scanned_bytes"), kMixedSize);
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("copy")), "");
}

TEST_F(RestoreModesTest, InPlaceRewritesOnlyTheChunksThatDiffer) {
  BackupMixed();
  WriteDrifted(Path("drifted"));
  // Only chunks 1 and 4 may be read: take the others' files away.
  const std::string c1 = ChunkFileAt(snap_, "disk0.img", 1);
  const std::string c4 = ChunkFileAt(snap_, "disk0.img", 4);
  for (const auto& [id, path] : ChunkFiles(store())) {
    if (path != c1 && path != c4) std::filesystem::remove(path);
  }
  RunResult r = OnStore("restore", {snap_, "disk0.img", Path("drifted"), "--in-place"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_TRUE(IsCompleteLine(ReportLines(r.out).back(), "image", kMixedSize)) << r.out;
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("drifted")), "");

  WriteDrifted(Path("drifted"));
  nlohmann::json j = RestoreJson({snap_, "disk0.img", Path("drifted"), "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("drifted")), "");
  const auto& a = j["archives"][0];
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "chunks_fetched"), 2u);
  EXPECT_EQ(U(a, "fetched_bytes"), 2 * kChunk);
  EXPECT_EQ(Skipped(a, "zero"), kChunk) << "the dirtied zero chunk, written as zeros";
  EXPECT_EQ(Skipped(a, "in_place"), kMixedSize - 3 * kChunk);
  EXPECT_EQ(U(a, "written_bytes"), 3 * kChunk);
  EXPECT_EQ(U(a, "scanned_bytes"), kMixedSize);
}

TEST_F(RestoreModesTest, InPlaceResizesShorterAndLongerFiles) {
  BackupMixed();
  // Shorter: the first 2.5 chunks.
  CopyFile(Path("mixed.raw"), Path("short"));
  TruncateFile(Path("short"), 2 * kChunk + 2 * kMiB);
  nlohmann::json j = RestoreJson({snap_, "disk0.img", Path("short"), "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("short")), "");
  ExpectImageAccounting(j["archives"][0]);
  // Chunks 0 and 1 were right; 3, 4 and the tail were not there.
  EXPECT_GE(Skipped(j["archives"][0], "in_place"), 2 * kChunk);
  EXPECT_GE(U(j["archives"][0], "written_bytes"), 2 * kChunk + kTail);

  // Longer: the image and 5 MiB of garbage after it.
  std::string data = ReadFile(Path("mixed.raw"));
  data += std::string(5 * kMiB, '\x77');
  WriteFile(Path("long"), data);
  data.clear();
  data.shrink_to_fit();
  j = RestoreJson({snap_, "disk0.img", Path("long"), "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("long")), "");
  ExpectImageAccounting(j["archives"][0]);
  EXPECT_EQ(Skipped(j["archives"][0], "in_place"), kMixedSize);
  EXPECT_EQ(U(j["archives"][0], "fetched_bytes"), 0u);
}

TEST_F(RestoreModesTest, TargetRules) {
  BackupMixed();
  // --in-place on a missing target: fails, says so, creates nothing.
  RunResult r = OnStore("restore", {snap_, "disk0.img", Path("missing"), "--in-place"});
  EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
  EXPECT_NE(r.err.find("does not exist"), std::string::npos) << r.Describe();
  EXPECT_FALSE(Exists(Path("missing")));
  EXPECT_FALSE(Exists(Path("missing.partial")));

  // --in-place with --overwrite: the parser refuses.
  CopyFile(Path("mixed.raw"), Path("copy"));
  r = OnStore("restore", {snap_, "disk0.img", Path("copy"), "--in-place", "--overwrite"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();

  // --in-place to stdout: a usage error.
  r = OnStore("restore", {snap_, "disk0.img", "-", "--in-place"});
  EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();

  // An existing target without --overwrite or --in-place: exit 1, unchanged.
  WriteFile(Path("existing"), "precious");
  r = OnStore("restore", {snap_, "disk0.img", Path("existing")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(ReadFile(Path("existing")), "precious");
  EXPECT_EQ(r.out.find("complete"), std::string::npos) << r.out;
  r = OnStore("restore", {snap_, "vm.conf.blob", Path("existing")});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(ReadFile(Path("existing")), "precious");

  // --memory below the minimum, or not a size; --jobs out of range.
  for (const char* m : {"15M", "1K", "lots"}) {
    r = OnStore("restore", {snap_, "disk0.img", Path("m"), "--memory", m});
    EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
    EXPECT_FALSE(Exists(Path("m")));
  }
  for (const char* n : {"0", "1025", "x"}) {
    r = OnStore("restore", {snap_, "disk0.img", Path("m"), "--jobs", n});
    EXPECT_EQ(r.exit_code, kExitUsage) << r.Describe();
    EXPECT_FALSE(Exists(Path("m")));
  }
}

// --- block devices --------------------------------------------------------------

// Loop devices attached for one test, detached at its end.
class RestoreModesLoopTest : public RestoreModesTest {
 protected:
  void TearDown() override {
    for (const std::string& dev : devices_) {
      std::string cmd = "losetup -d " + dev + " 2>/dev/null";
      if (std::system(cmd.c_str()) != 0) ADD_FAILURE() << "could not detach " << dev;
    }
    devices_.clear();
    RestoreModesTest::TearDown();
  }

  // A loop device on `file`; "" when losetup is missing or fails (not root).
  std::string Attach(const std::string& file) {
    std::string cmd = "losetup -f --show '" + file + "' 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "";
    char buf[256] = {};
    std::string dev;
    if (std::fgets(buf, sizeof buf, p) != nullptr) dev = buf;
    int rc = ::pclose(p);
    while (!dev.empty() && (dev.back() == '\n' || dev.back() == ' ')) dev.pop_back();
    if (rc != 0 || !dev.starts_with("/dev/")) return "";
    devices_.push_back(dev);
    return dev;
  }

  std::vector<std::string> devices_;
};

TEST_F(RestoreModesLoopTest, OverwriteAndInPlaceOntoBlockDevice) {
  BackupMixed();
  // The device: 3 MiB longer than the image, garbage everywhere.
  const uint64_t dev_size = kMixedSize + 3 * kMiB;
  ImageWriter(Path("backing"), dev_size, 11).Random(0, dev_size);
  const std::string dev = Attach(Path("backing"));
  if (dev.empty()) GTEST_SKIP() << "losetup unavailable or not permitted";
  const std::string after_image = ReadRange(dev, kMixedSize, 3 * kMiB);
  ASSERT_EQ(after_image.size(), 3 * kMiB);

  // Without --overwrite: refused, untouched.
  const std::string before = ReadRange(dev, 0, kChunk);
  RunResult r = OnStore("restore", {snap_, "disk0.img", dev});
  EXPECT_EQ(r.exit_code, kExitFailure) << r.Describe();
  EXPECT_EQ(ReadRange(dev, 0, kChunk), before);

  nlohmann::json j = RestoreJson({snap_, "disk0.img", dev, "--overwrite"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(ComparePrefix(Path("mixed.raw"), dev, kMixedSize), "");
  EXPECT_TRUE(ReadRange(dev, kMixedSize, 3 * kMiB) == after_image)
      << "bytes past the image must stay as they were";
  ExpectImageAccounting(j["archives"][0]);
  EXPECT_EQ(U(j["archives"][0], "written_bytes"), kMixedSize) << "zeros written on a device";

  // Drift on the device, then in place: only the three changed chunks.
  WriteDrifted(Path("drifted"));
  {
    std::string d = ReadFile(Path("drifted"));
    int fd = ::open(dev.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(::pwrite(fd, d.data(), d.size(), 0), static_cast<ssize_t>(d.size()));
    ASSERT_EQ(::fsync(fd), 0);
    ::close(fd);
  }
  ASSERT_NE(ComparePrefix(Path("mixed.raw"), dev, kMixedSize), "");
  j = RestoreJson({snap_, "disk0.img", dev, "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(ComparePrefix(Path("mixed.raw"), dev, kMixedSize), "");
  EXPECT_TRUE(ReadRange(dev, kMixedSize, 3 * kMiB) == after_image);
  const auto& a = j["archives"][0];
  ExpectImageAccounting(a);
  EXPECT_EQ(U(a, "chunks_fetched"), 2u);
  EXPECT_EQ(U(a, "written_bytes"), 3 * kChunk);
  EXPECT_EQ(Skipped(a, "in_place"), kMixedSize - 3 * kChunk);
  EXPECT_EQ(U(a, "scanned_bytes"), kMixedSize);

  // Identical now: nothing to do.
  j = RestoreJson({snap_, "disk0.img", dev, "--in-place"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(U(j["archives"][0], "written_bytes"), 0u);
  EXPECT_EQ(Skipped(j["archives"][0], "in_place"), kMixedSize);
}

TEST_F(RestoreModesLoopTest, DeviceSmallerThanImageIsRefused) {
  BackupMixed();
  ImageWriter(Path("small"), 4 * kChunk, 12).Fill(0, 4 * kChunk, 0x33);
  const std::string dev = Attach(Path("small"));
  if (dev.empty()) GTEST_SKIP() << "losetup unavailable or not permitted";
  for (const char* mode : {"--overwrite", "--in-place"}) {
    RunResult r = OnStore("restore", {snap_, "disk0.img", dev, mode});
    EXPECT_NE(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(ReadRange(dev, 0, 4 * kChunk), std::string(4 * kChunk, '\x33')) << mode;
  }
}

}  // namespace
}  // namespace cairn::cli_test::restore_modes_test
