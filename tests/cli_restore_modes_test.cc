// The restore modes of `cairn restore` (issue "Parallel restore"): the final
// line per archive, the JSON byte accounting, --all into a directory with
// chunks shared between images fetched once, --in-place onto files and
// block devices, --rehearse, the --memory budget (bytes in flight and the
// child's peak RSS), failures mid-restore, and byte-identical results
// whatever the read concurrency and completion order.
//
// Nothing here asserts on time or speed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// The mixed image: 6 full chunks and a short random tail.
//   0 random   1 text   2 hole (zero)   3 copy of 0   4 random
//   5 explicit zeros   6 random tail of kTail bytes
// A multiple of 512 bytes, so it also fits a loop device exactly.
constexpr uint64_t kTail = kMiB + 512;
constexpr uint64_t kMixedSize = 6 * kChunk + kTail;
constexpr uint64_t kMixedZero = 2 * kChunk;                // chunks 2 and 5
constexpr uint64_t kMixedDedup = kChunk;                   // chunk 3
constexpr uint64_t kMixedFetched = 3 * kChunk + kTail;     // chunks 0, 1, 4, 6
constexpr uint64_t kMixedChunksFetched = 4;
constexpr const char* kConf = "memory: 4096\ncores: 4\nnet0: virtio,bridge=vmbr0\n";

void WriteMixed(const std::string& path, uint64_t seed) {
  ImageWriter(path, kMixedSize, seed)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)
      .Copy(0, 3 * kChunk, kChunk)
      .Random(4 * kChunk, kChunk)
      .Zeros(5 * kChunk, kChunk)
      .Random(6 * kChunk, kTail);
}

uint64_t U(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) {
    ADD_FAILURE() << "no unsigned \"" << key << "\" in " << j.dump();
    return 0;
  }
  return j[key].get<uint64_t>();
}

uint64_t Skipped(const nlohmann::json& a, const char* key) {
  if (!a.contains("skipped_bytes") || !a["skipped_bytes"].is_object()) {
    ADD_FAILURE() << "no skipped_bytes object in " << a.dump();
    return 0;
  }
  return U(a["skipped_bytes"], key);
}

// Every image byte is fetched, or skipped as zero, dedup or in place.
void ExpectImageAccounting(const nlohmann::json& a) {
  SCOPED_TRACE(a.dump());
  EXPECT_EQ(a["kind"], "image");
  EXPECT_EQ(U(a, "bytes"), U(a, "fetched_bytes") + Skipped(a, "zero") + Skipped(a, "dedup") +
                               Skipped(a, "in_place"));
}

// The lines of a summary, without the "bottleneck: …" line that ends every
// restore's (cli_bottleneck_test.cc checks it): the archives' lines come
// last before it.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  if (!lines.empty() && lines.back().starts_with("bottleneck: ")) lines.pop_back();
  return lines;
}

// "restore image complete (bytes=N, duration=S s, speed=M MB/s)" for `bytes`.
bool IsCompleteLine(const std::string& line, const std::string& kind, uint64_t bytes) {
  static const std::regex kRe(
      R"(restore (image|blob) complete \(bytes=(\d+), duration=\d+(\.\d+)? s, speed=\d+(\.\d+)? MB/s\))");
  std::smatch m;
  return std::regex_match(line, m, kRe) && m[1] == kind && m[2] == std::to_string(bytes);
}

bool IsRehearsalLine(const std::string& line, const std::string& kind, const std::string& name,
                     uint64_t bytes) {
  const std::regex re("rehearsal " + kind + " " + std::regex_replace(name, std::regex(R"(\.)"), R"(\.)") +
                      R"( complete \(bytes=)" + std::to_string(bytes) +
                      R"(, duration=\d+(\.\d+)? s, speed=\d+(\.\d+)? MB/s\).*)");
  return std::regex_match(line, re);
}

// `len` bytes of `path` (a file or a block device) at `offset`.
std::string ReadRange(const std::string& path, uint64_t offset, uint64_t len) {
  std::string data(len, '\0');
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ADD_FAILURE() << "open " << path << ": " << std::strerror(errno);
    return "";
  }
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, data.data() + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(done);
  return data;
}

// "" when the first `len` bytes of a and b are equal, else where they differ.
std::string ComparePrefix(const std::string& a, const std::string& b, uint64_t len) {
  std::string da = ReadRange(a, 0, len), db = ReadRange(b, 0, len);
  if (da.size() != len || db.size() != len) {
    return "short read: " + std::to_string(da.size()) + " and " + std::to_string(db.size()) +
           " of " + std::to_string(len);
  }
  auto [ia, ib] = std::mismatch(da.begin(), da.end(), db.begin());
  if (ia == da.end()) return "";
  return "first difference at offset " + std::to_string(ia - da.begin());
}

// Copies a file (small images only).
void CopyFile(const std::string& from, const std::string& to) { WriteFile(to, ReadFile(from)); }

// The test process's resident set now, in bytes (for messages).
uint64_t SelfRss() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  int n = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

class RestoreModesTest : public CliTest {
 protected:
  // Backs up the mixed image as disk0.img and kConf as vm.conf.blob into
  // vm/100 at t=1.
  void BackupMixed() {
    WriteMixed(Path("mixed.raw"), 101);
    WriteFile(Path("vm.conf"), kConf);
    Backup("vm/100", 1, {"disk0.img=" + Path("mixed.raw"), "vm.conf.blob=" + Path("vm.conf")},
           /*json=*/false);
    snap_ = Snap("vm/100", 1);
  }

  // cairn restore -r STORE ARGS… --json; expects `want_exit` and returns
  // the parsed report (null unless it exited 0).
  nlohmann::json RestoreJson(std::vector<std::string> args, int want_exit = kExitOk) {
    args.push_back("--json");
    RunResult r = OnStore("restore", args);
    EXPECT_EQ(r.exit_code, want_exit) << r.Describe();
    if (r.exit_code != kExitOk) return nullptr;
    return ParseJson(r.out);
  }

  // The chunk file holding position `pos` of `archive` in `snap`.
  std::string ChunkFileAt(const std::string& snap, const std::string& archive, size_t pos) {
    std::vector<std::string> ids = IndexDigests(SnapshotDir(store(), snap) + "/" + archive + ".fidx");
    if (pos >= ids.size()) {
      ADD_FAILURE() << archive << " has " << ids.size() << " chunks, not " << pos + 1;
      return "";
    }
    auto files = ChunkFiles(store());
    auto it = files.find(ids[pos]);
    if (it == files.end()) {
      ADD_FAILURE() << "no chunk file for " << ids[pos];
      return "";
    }
    return it->second;
  }

  // A copy of the mixed image with a few bytes changed in chunks 1 and 4
  // and the zero chunk 5 dirtied: a restore in place must rewrite exactly
  // those three chunks.
  void WriteDrifted(const std::string& path) {
    CopyFile(Path("mixed.raw"), path);
    WriteRandomAt(path, kChunk + 12345, 7, 1);
    WriteRandomAt(path, 4 * kChunk + kChunk - 3, 3, 2);
    WriteRandomAt(path, 5 * kChunk + kMiB, 100, 3);
  }

  std::string snap_;
};

// --- output ---------------------------------------------------------------

TEST_F(RestoreModesTest, FinalLinePerArchive) {
  BackupMixed();
  RunResult r = OnStore("restore", {snap_, "disk0.img", Path("d0")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u) << r.out;
  EXPECT_TRUE(IsCompleteLine(lines.back(), "image", kMixedSize)) << r.out;
  EXPECT_TRUE(lines[lines.size() - 2].starts_with("restored disk0.img:")) << r.out;
  EXPECT_NE(r.out.find("\nbottleneck: "), std::string::npos) << r.out;  // and then the limit
  EXPECT_EQ(CompareFiles(Path("mixed.raw"), Path("d0")), "");

  r = OnStore("restore", {snap_, "vm.conf.blob", Path("conf")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  lines = Lines(r.out);
  ASSERT_GE(lines.size(), 1u) << r.out;
  EXPECT_TRUE(IsCompleteLine(lines.back(), "blob", std::strlen(kConf))) << r.out;
  EXPECT_EQ(ReadFile(Path("conf")), kConf);

  // --all: one final line per archive, in manifest order.
  r = OnStore("restore", {snap_, "--all", Path("all")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> finals;
  for (const auto& l : Lines(r.out)) {
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
  lines = Lines(r.err);
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
  EXPECT_TRUE(IsCompleteLine(Lines(r.out).back(), "image", kMixedSize)) << r.out;
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
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_FALSE(lines.empty());
  EXPECT_TRUE(IsRehearsalLine(lines.back(), "image", "disk0.img", kMixedSize)) << r.out;
  EXPECT_EQ(r.out.find("restore image complete"), std::string::npos) << r.out;

  r = OnStore("restore", {snap_, "--all", "--rehearse"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  std::vector<std::string> finals;
  for (const auto& l : Lines(r.out)) {
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
}  // namespace cairn::cli_test
