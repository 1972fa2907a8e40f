// Harness for the integration, crash and fault-injection tests: they run the
// real `cairn` binary (CAIRN_BINARY, compiled in) as a user would and look
// only at what a user sees: exit codes, stdout, stderr, the files it writes.
//
// What is here:
//   - TempDir: a directory that removes itself, on tmpfs when there is room
//     (cairn's init creates many directories and backups call syncfs, both
//     much cheaper there);
//   - RunCairn: spawn cairn with arguments, capture stdout and
//     stderr (or stream stdout to a callback), optionally SIGKILL it after a
//     delay or when a hook says so;
//   - image writers (zeros, random, compressible text, duplicated regions,
//     sparse files) driven by a seeded RNG, so every run writes the same bytes;
//   - file helpers: byte-by-byte comparison, bit flips, truncation, listing
//     chunk files, reading a fixed index's digests.
//
// Tests must be deterministic and never fail because the machine is slow:
// nothing here asserts on time. Helpers that cannot do their job fail the
// current test (ADD_FAILURE) and return an empty value.
//
// Thread safety: none; one test uses its objects from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace cairn::cli_test {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;
// cairn's image chunk size (docs/FORMAT.md, fixed index).
inline constexpr uint64_t kChunk = 4 * kMiB;

// Path of the cairn binary under test: $CAIRN_BINARY when set (scripts/test.sh
// runs the release build's integration tests against the sanitizer builds'
// binaries that way), else the one built beside these tests.
const char* CairnBinary();

// True when the cairn binary under test runs under a sanitizer: this binary
// was built with one, or $CAIRN_TEST_SANITIZED=1 says the one in
// $CAIRN_BINARY was. RSS figures mean little then, and stress loops run fewer
// rounds (every cairn run is several times slower).
bool CairnSanitized();

// False when CAIRN_TEST_LARGE=0: the 2 GiB and > 4 GiB cases shrink (for
// sanitizer builds). Default: true.
bool LargeTestsEnabled();

// A fresh directory, removed with its contents on destruction. Lives under
// $CAIRN_TEST_TMPDIR when set, else /dev/shm when it has a few GiB free,
// else $TMPDIR or /tmp.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

struct RunResult {
  int exit_code = -1;   // -1 when the process ended by a signal
  int term_signal = 0;  // the signal, when it did
  std::string out;      // stdout (empty when streamed to a sink)
  std::string err;      // stderr
  std::string command;  // for messages
  // The child's peak resident set (ru_maxrss from wait4), in bytes. Linux
  // folds the high-water mark of the forked copy of the test process into
  // it at exec, so it is at least the test's own anonymous memory at fork
  // time: keep the test process small, or compare runs rather than trust
  // small absolute values.
  uint64_t peak_rss_bytes = 0;

  bool killed() const { return term_signal != 0; }
  // "cairn backup …: exit 1\nstdout: …\nstderr: …" for assertion messages.
  std::string Describe() const;
};

struct RunOptions {
  // SIGKILL the process this long after it was started (zero: never).
  std::chrono::microseconds kill_after{0};
  // When set, stdout is handed here piece by piece instead of RunResult::out
  // (for outputs too large to hold, like a restored 4 GiB image).
  std::function<void(std::string_view)> stdout_sink;
  // Called about every millisecond while the process runs; returning true
  // SIGKILLs it.
  std::function<bool(pid_t)> poll;
  // Extra environment entries NAME=VALUE. CAIRN_REPO is never inherited.
  std::vector<std::string> env;
  // When non-zero, RLIMIT_FSIZE for the process with SIGXFSZ ignored: a
  // write past it fails with EFBIG, the way a full disk fails with ENOSPC.
  uint64_t file_size_limit = 0;
  // When set, the command line is WRAPPER… cairn ARGS… (cairn-killpoint
  // and its options: tests/cli_kill.h).
  std::vector<std::string> wrapper;
};

// Runs cairn with `args` and waits for it. A run that takes longer than
// ten minutes is killed and fails the test (a hang, not slowness). With
// CAIRN_TEST_VERBOSE set, each run's command, duration and exit go to stderr.
RunResult RunCairn(const std::vector<std::string>& args, const RunOptions& options = {});

// Parses `text` as JSON; fails the test and returns null when it is not.
nlohmann::json ParseJson(const std::string& text);

// The lines of a command's report, without the "bottleneck: …" line that
// ends a run that read chunks (cli_bottleneck_test.cc checks that one).
std::vector<std::string> ReportLines(const std::string& text);

// --- images --------------------------------------------------------------

// Writes images region by region with a seeded RNG. The file is created (or
// truncated) to `size` bytes by ftruncate, so unwritten regions are holes.
class ImageWriter {
 public:
  ImageWriter(std::string path, uint64_t size, uint64_t seed);
  ~ImageWriter();
  ImageWriter(const ImageWriter&) = delete;
  ImageWriter& operator=(const ImageWriter&) = delete;

  // Explicit zero bytes (allocated, not a hole).
  ImageWriter& Zeros(uint64_t offset, uint64_t len);
  // Incompressible random bytes.
  ImageWriter& Random(uint64_t offset, uint64_t len);
  // Compressible text: words from a small vocabulary.
  ImageWriter& Text(uint64_t offset, uint64_t len);
  // A copy of [from, from + len) at `offset` (regions must not overlap).
  ImageWriter& Copy(uint64_t from, uint64_t offset, uint64_t len);
  // `byte` repeated.
  ImageWriter& Fill(uint64_t offset, uint64_t len, uint8_t byte);

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  void Write(uint64_t offset, const std::string& data);

  std::string path_;
  uint64_t size_;
  int fd_ = -1;
  std::mt19937_64 rng_;
};

// Opens an existing file and writes random bytes at `offset` (seeded).
void WriteRandomAt(const std::string& path, uint64_t offset, uint64_t len, uint64_t seed);

// --- files -----------------------------------------------------------------

// "" when the files are byte-identical, else what differs (size or the
// first differing offset).
std::string CompareFiles(const std::string& a, const std::string& b);

// Compares a stream piece by piece against a file (for restores to stdout
// too large to hold). Feed() pieces in order, then Result().
class StreamComparer {
 public:
  explicit StreamComparer(const std::string& expected_path);
  ~StreamComparer();
  StreamComparer(const StreamComparer&) = delete;
  StreamComparer& operator=(const StreamComparer&) = delete;

  void Feed(std::string_view piece);
  // "" when the stream equalled the file, else what differed.
  std::string Result() const;

 private:
  int fd_ = -1;
  uint64_t file_size_ = 0;
  uint64_t pos_ = 0;
  std::string error_;
  std::string buf_;
};

bool Exists(const std::string& path);
uint64_t FileSize(const std::string& path);
// Bytes the file really occupies (st_blocks × 512).
uint64_t AllocatedBytes(const std::string& path);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, std::string_view data);
// An image of whole chunks (kChunk each), chunk i of random bytes seeded by
// seeds[i]: two images share exactly the chunks whose seeds they share.
void WriteChunkImage(const std::string& path, const std::vector<uint64_t>& seeds);
void FlipBit(const std::string& path, uint64_t offset, int bit);
void TruncateFile(const std::string& path, uint64_t size);
// Names of the entries in `dir` (files and directories), sorted.
std::vector<std::string> ListDir(const std::string& dir);

// --- datastore layout (docs/FORMAT.md) ----------------------------------

// Every chunk file in `store`: 64-hex id → path. Temporary files are not
// chunks and are left out.
std::map<std::string, std::string> ChunkFiles(const std::string& store);
// The chunk ids a fixed index (NAME.img.fidx) lists, in image order, as hex.
std::vector<std::string> IndexDigests(const std::string& fidx_path);
// STORE/TYPE/ID/TIME.
std::string SnapshotDir(const std::string& store, const std::string& snapshot);
// SHA-256 of `data` as hex: the id cairn gives a chunk with this plaintext.
std::string Sha256Hex(std::string_view data);
// The id of a full chunk of zeros.
std::string ZeroChunkId();

}  // namespace cairn::cli_test
