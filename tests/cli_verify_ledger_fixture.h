// The fixture of the verify ledger tests (cli_verify_ledger_test.cc,
// cli_verify_ledger_rolling_test.cc): the ledger's on-disk format read and
// written independently of src/verify (docs/FORMAT.md, "Verify ledger"),
// and VerifyLedgerTest.
#pragma once

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


namespace cairn::cli_test::verify_ledger_test {

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
inline uint32_t Crc32c(std::string_view data) {
  uint32_t crc = ~0u;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline std::string Le(uint64_t v, int bytes) {
  std::string s(static_cast<size_t>(bytes), '\0');
  for (int i = 0; i < bytes; ++i) s[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return s;
}

inline uint64_t GetLe(std::string_view s, size_t off, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = v << 8 | static_cast<unsigned char>(s[off + static_cast<size_t>(i)]);
  }
  return v;
}

inline std::string FromHex(std::string_view hex) {
  std::string out(hex.size() / 2, '\0');
  auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

inline std::string ToHex(std::string_view bytes) {
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

inline std::string EncodeRecord(const Record& r) {
  return FromHex(r.id) + Le(static_cast<uint64_t>(r.time), 8) +
         Le(static_cast<uint64_t>(r.verdict), 1);
}

inline Record DecodeRecord(std::string_view p) {
  return Record{ToHex(p.substr(0, 32)), static_cast<int64_t>(GetLe(p, 32, 8)),
                static_cast<unsigned char>(p[40])};
}

// A `ledger` file holding `records` (sorted here by id).
inline std::string LedgerFileBytes(std::vector<Record> records) {
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
inline std::vector<Record> ReadLedgerFile(const std::string& path) {
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
inline std::vector<Record> ReadJournal(const std::string& path) {
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

inline std::set<std::string> IdsOf(const std::vector<Record>& records, size_t from = 0) {
  std::set<std::string> ids;
  for (size_t i = from; i < records.size(); ++i) ids.insert(records[i].id);
  return ids;
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

}  // namespace cairn::cli_test::verify_ledger_test
