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
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

namespace fs = std::filesystem;

// --- the ledger's on-disk format (docs/FORMAT.md, "Verify ledger") -------

constexpr size_t kLedgerHeader = 32;
constexpr size_t kRecord = 41;
constexpr size_t kBatchOverhead = 16 + 4;
// Verify appends its results in batches of this many chunks
// (src/verify/verify.cc, LedgerWriter::kBatch).
constexpr size_t kVerifyBatch = 256;

// CRC32C (Castagnoli), bit by bit: the tests write and read ledger files
// from the format description alone, not with cairn's code.
uint32_t Crc32c(std::string_view data) {
  uint32_t crc = ~0u;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

std::string Le(uint64_t v, int bytes) {
  std::string s(static_cast<size_t>(bytes), '\0');
  for (int i = 0; i < bytes; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

uint64_t GetLe(std::string_view s, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = v << 8 | static_cast<unsigned char>(s[off + static_cast<size_t>(i)]);
  }
  return v;
}

std::string FromHex(std::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

struct Record {
  std::string id;  // 64 hex
  int64_t time = 0;
  int verdict = 0;  // 0 ok, 1 corrupt, 2 missing, 3 error
};

std::string EncodeRecord(const Record& r) {
  return FromHex(r.id) + Le(static_cast<uint64_t>(r.time), 8) +
         Le(static_cast<uint64_t>(r.verdict), 1);
}

Record DecodeRecord(std::string_view p) {
  return Record{ToHex(p.substr(0, 32)), static_cast<int64_t>(GetLe(p, 32, 8)),
                static_cast<unsigned char>(p[40])};
}

// A `ledger` file holding `records` (sorted here by id).
std::string LedgerFileBytes(std::vector<Record> records) {
  std::sort(records.begin(), records.end(), [](const Record& a, const Record& b) {
    return a.id < b.id;
  });  // hex order = byte order
  std::string body;
  for (const Record& r : records) body += EncodeRecord(r);
  std::string h =
      "CAIRNLDG" + Le(1, 2) + Le(0, 2) + Le(Crc32c(body), 4) + Le(records.size(), 8) + Le(0, 4);
  h += Le(Crc32c(h), 4);
  return h + body;
}

// The records of a `ledger` file; fails the test when it is not valid.
std::vector<Record> ReadLedgerFile(const std::string& path) {
  std::vector<Record> out;
  const std::string data = ReadFile(path);
  if (data.size() < kLedgerHeader || data.substr(0, 8) != "CAIRNLDG" ||
      GetLe(data, 28, 4) != Crc32c(data.substr(0, 28)) ||
      data.size() != kLedgerHeader + kRecord * GetLe(data, 16, 8) ||
      GetLe(data, 12, 4) != Crc32c(data.substr(kLedgerHeader))) {
    ADD_FAILURE() << path << " is not a valid ledger file (" << data.size() << " bytes)";
    return out;
  }
  for (size_t off = kLedgerHeader; off < data.size(); off += kRecord) {
    out.push_back(DecodeRecord(std::string_view(data).substr(off, kRecord)));
  }
  return out;
}

// The records of every batch of a journal, in file order; fails the test
// at a batch that is not valid (these tests read journals cairn wrote whole).
std::vector<Record> ReadJournal(const std::string& path) {
  std::vector<Record> out;
  const std::string data = ReadFile(path);
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t count = data.size() - pos >= 16 ? GetLe(data, pos + 12, 4) : 0;
    const size_t len = kBatchOverhead + count * kRecord;
    if (count == 0 || data.substr(pos, 8) != "CAIRNJNL" || data.size() - pos < len ||
        GetLe(data, pos + len - 4, 4) != Crc32c(std::string_view(data).substr(pos, len - 4))) {
      ADD_FAILURE() << path << ": no valid batch at offset " << pos << " of " << data.size();
      return out;
    }
    for (size_t i = 0; i < count; ++i) {
      out.push_back(DecodeRecord(std::string_view(data).substr(pos + 16 + i * kRecord, kRecord)));
    }
    pos += len;
  }
  return out;
}

std::set<std::string> IdsOf(const std::vector<Record>& records, size_t from = 0) {
  std::set<std::string> ids;
  for (size_t i = from; i < records.size(); ++i) ids.insert(records[i].id);
  return ids;
}

// Without the "bottleneck: …" line that ends a verify that read chunks
// (cli_bottleneck_test.cc checks it).
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  if (!lines.empty() && lines.back().starts_with("bottleneck: ")) lines.pop_back();
  return lines;
}

// The summary every human-readable verify ends with (PBS style).
const std::regex kFinalLine(R"(^verified \d+\.\d\d/\d+\.\d\d MiB in \d+\.\d\d s, )"
                            R"(speed \d+\.\d\d/\d+\.\d\d MiB/s \((\d+) errors\)$)");

// --- fixture ---------------------------------------------------------------

class VerifyLedgerTest : public CliTest {
 protected:
  std::string LedgerDir() const { return store() + "/.ledger"; }
  std::string JournalPath() const { return LedgerDir() + "/journal"; }
  std::string LedgerPath() const { return LedgerDir() + "/ledger"; }
  std::string JobPath() const { return LedgerDir() + "/job.json"; }

  // `chunks` full chunks, each 64 random bytes then zeros: distinct ids,
  // quick to back up and verify.
  std::string SparseImage(const std::string& name, uint64_t chunks, uint64_t seed) const {
    const std::string path = Path(name);
    ImageWriter w(path, chunks * kChunk, seed);
    for (uint64_t i = 0; i < chunks; ++i) w.Random(i * kChunk, 64);
    return path;
  }

  // cairn verify -r STORE ARGS… --json: fails the test unless it exits
  // `exit` with a JSON object on stdout; returns that (empty if none).
  nlohmann::json VerifyJson(std::vector<std::string> args, int exit = kExitOk,
                            RunResult* result = nullptr, const RunOptions& options = {}) const {
    args.push_back("--json");
    RunResult r = OnStore("verify", args, options);
    EXPECT_EQ(r.exit_code, exit) << r.Describe();
    nlohmann::json j = ParseJson(r.out);
    EXPECT_TRUE(j.is_object()) << r.Describe();
    if (result != nullptr) *result = std::move(r);
    return j.is_object() ? j : nlohmann::json::object();
  }

  // snapshot → state ("ok", "failed", "incomplete") in a verify report.
  static std::map<std::string, std::string> States(const nlohmann::json& v) {
    std::map<std::string, std::string> out;
    for (const auto& s : v.value("snapshots", nlohmann::json::array())) {
      out[s.value("snapshot", "")] = s.value("state", "");
    }
    return out;
  }

  // snapshot → recorded verify state per `snapshots --json` ("" = none).
  std::map<std::string, std::string> RecordedStates() const {
    std::map<std::string, std::string> out;
    nlohmann::json snaps = SnapshotsJson();
    if (!snaps.is_array()) return out;
    for (const auto& s : snaps) {
      const auto& v = s["verify"];
      out[s.value("snapshot", "")] = v.is_object() ? v.value("state", "") : "";
    }
    return out;
  }

  // The chunk ids of SNAPSHOT's archive (TYPE/ID/TIME, "disk0.img").
  std::vector<std::string> Ids(const std::string& snapshot,
                               const std::string& archive = "disk0.img") const {
    return IndexDigests(SnapshotDir(store(), snapshot) + "/" + archive + ".fidx");
  }
};

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
  std::vector<std::string> lines = Lines(r.out);
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
  std::vector<std::string> lines = Lines(r.out);
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
  lines = Lines(r.out);
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
    std::vector<std::string> lines = Lines(r.out);
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
  std::vector<std::string> lines = Lines(r.out);
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
  const std::vector<std::string> lines = Lines(r.out);
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
  const std::vector<std::string> lines = Lines(r.out);
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
}  // namespace cairn::cli_test
