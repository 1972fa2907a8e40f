// The fixture of the restore-mode tests (cli_restore_modes_test.cc,
// cli_restore_rehearse_test.cc): the mixed image (random, text, zero, copied
// chunks and a short tail), readers of the JSON byte accounting and the
// final lines, and RestoreModesTest.
#pragma once

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


namespace cairn::cli_test::restore_modes_test {

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

inline void WriteMixed(const std::string& path, uint64_t seed) {
  ImageWriter(path, kMixedSize, seed)
      .Random(0, kChunk)
      .Text(kChunk, kChunk)
      .Copy(0, 3 * kChunk, kChunk)
      .Random(4 * kChunk, kChunk)
      .Zeros(5 * kChunk, kChunk)
      .Random(6 * kChunk, kTail);
}

inline uint64_t U(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number_unsigned()) {
    ADD_FAILURE() << "no unsigned \"" << key << "\" in " << j.dump();
    return 0;
  }
  return j[key].get<uint64_t>();
}

inline uint64_t Skipped(const nlohmann::json& a, const char* key) {
  if (!a.contains("skipped_bytes") || !a["skipped_bytes"].is_object()) {
    ADD_FAILURE() << "no skipped_bytes object in " << a.dump();
    return 0;
  }
  return U(a["skipped_bytes"], key);
}

// Every image byte is fetched, or skipped as zero, dedup or in place.
inline void ExpectImageAccounting(const nlohmann::json& a) {
  SCOPED_TRACE(a.dump());
  EXPECT_EQ(a["kind"], "image");
  EXPECT_EQ(U(a, "bytes"), U(a, "fetched_bytes") + Skipped(a, "zero") + Skipped(a, "dedup") +
                               Skipped(a, "in_place"));
}

// "restore image complete (bytes=N, duration=S s, speed=M MB/s)" for `bytes`.
inline bool IsCompleteLine(const std::string& line, const std::string& kind, uint64_t bytes) {
  static const std::regex kRe(
      R"(restore (image|blob) complete \(bytes=(\d+), duration=\d+(\.\d+)? s, speed=\d+(\.\d+)? MB/s\))");
  std::smatch m;
  return std::regex_match(line, m, kRe) && m[1] == kind && m[2] == std::to_string(bytes);
}

inline bool IsRehearsalLine(const std::string& line, const std::string& kind,
                            const std::string& name, uint64_t bytes) {
  const std::regex re("rehearsal " + kind + " " +
                      std::regex_replace(name, std::regex(R"(\.)"), R"(\.)") +
                      R"( complete \(bytes=)" + std::to_string(bytes) +
                      R"(, duration=\d+(\.\d+)? s, speed=\d+(\.\d+)? MB/s\).*)");
  return std::regex_match(line, re);
}

// `len` bytes of `path` (a file or a block device) at `offset`.
inline std::string ReadRange(const std::string& path, uint64_t offset, uint64_t len) {
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
inline std::string ComparePrefix(const std::string& a, const std::string& b, uint64_t len) {
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
inline void CopyFile(const std::string& from, const std::string& to) {
  WriteFile(to, ReadFile(from));
}

// The test process's resident set now, in bytes (for messages).
inline uint64_t SelfRss() {
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
    std::vector<std::string> ids =
        IndexDigests(SnapshotDir(store(), snap) + "/" + archive + ".fidx");
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

}  // namespace cairn::cli_test::restore_modes_test
