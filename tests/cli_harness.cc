#include "cli_harness.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

extern char** environ;

namespace cairn::cli_test {
namespace fs = std::filesystem;
namespace {

bool HasFreeSpace(const char* dir, uint64_t bytes) {
  struct statvfs st;
  if (::statvfs(dir, &st) != 0) return false;
  if (::access(dir, W_OK) != 0) return false;
  return uint64_t{st.f_bavail} * st.f_frsize >= bytes;
}

std::string TempRoot() {
  if (const char* d = std::getenv("CAIRN_TEST_TMPDIR"); d && *d) return d;
  // tmpfs: init's prefix directories and syncfs cost almost nothing there.
  if (HasFreeSpace("/dev/shm", 3 * kGiB)) return "/dev/shm";
  if (const char* d = std::getenv("TMPDIR"); d && *d) return d;
  return "/tmp";
}

std::string Quote(const std::vector<std::string>& args) {
  std::string s = "cairn";
  for (const auto& a : args) s += " " + (a.find(' ') == std::string::npos ? a : "'" + a + "'");
  return s;
}

// Opens `path` or fails the test.
int OpenOrFail(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0) ADD_FAILURE() << "open " << path << ": " << std::strerror(errno);
  return fd;
}

void PwriteAll(int fd, const char* data, size_t len, uint64_t offset, const std::string& path) {
  while (len > 0) {
    ssize_t n = ::pwrite(fd, data, len, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ADD_FAILURE() << "write " << path << " at " << offset << ": " << std::strerror(errno);
      return;
    }
    data += n;
    len -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
}

// Reads up to `len` bytes at `offset`; returns how many (short at EOF).
size_t PreadAll(int fd, char* data, size_t len, uint64_t offset) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pread(fd, data + done, len - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

std::string RandomBytes(std::mt19937_64& rng, uint64_t len) {
  std::string s(len, '\0');
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t v = rng();
    std::memcpy(s.data() + i, &v, 8);
  }
  for (; i < len; ++i) s[i] = static_cast<char>(rng());
  return s;
}

std::string ToHex(const unsigned char* p, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += kHex[p[i] >> 4];
    s += kHex[p[i] & 15];
  }
  return s;
}

}  // namespace

const char* CairnBinary() {
  const char* v = std::getenv("CAIRN_BINARY");
  return v != nullptr && *v != '\0' ? v : CAIRN_BINARY;
}

// GCC and clang both define __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__ or
// answer __has_feature for the sanitizer this binary was built with.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
static constexpr bool kBuiltSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
static constexpr bool kBuiltSanitized = true;
#else
static constexpr bool kBuiltSanitized = false;
#endif
#else
static constexpr bool kBuiltSanitized = false;
#endif

bool CairnSanitized() {
  const char* v = std::getenv("CAIRN_TEST_SANITIZED");
  return kBuiltSanitized || (v != nullptr && std::string_view(v) == "1");
}

bool LargeTestsEnabled() {
  const char* v = std::getenv("CAIRN_TEST_LARGE");
  return v == nullptr || std::string_view(v) != "0";
}

TempDir::TempDir() {
  std::string tmpl = TempRoot() + "/cairn-integ-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp " << tmpl << ": " << std::strerror(errno);
  }
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string RunResult::Describe() const {
  std::ostringstream s;
  s << command << ": ";
  if (term_signal != 0) {
    s << "killed by signal " << term_signal;
  } else {
    s << "exit " << exit_code;
  }
  s << "\nstdout: " << out.substr(0, 4000) << "\nstderr: " << err.substr(0, 4000);
  return s.str();
}

RunResult RunCairn(const std::vector<std::string>& args, const RunOptions& options) {
  RunResult result;
  result.command = Quote(args);

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return result;
  }
  std::vector<std::string> argv_s = options.wrapper;
  argv_s.push_back(CairnBinary());
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string_view(*e).starts_with("CAIRN_REPO=")) continue;
    env_s.emplace_back(*e);
  }
  env_s.insert(env_s.end(), options.env.begin(), options.env.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  // fork + exec rather than posix_spawn: the child may need a resource
  // limit. Between the two only async-signal-safe calls.
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out_pipe[1], 1) < 0 ||
        ::dup2(err_pipe[1], 2) < 0) {
      ::_exit(127);
    }
    if (options.file_size_limit > 0) {
      struct sigaction ign = {};
      ign.sa_handler = SIG_IGN;
      ::sigaction(SIGXFSZ, &ign, nullptr);
      struct rlimit lim = {options.file_size_limit, options.file_size_limit};
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return result;
  }

  const auto hang_limit = start + std::chrono::minutes(10);
  const bool has_deadline = options.kill_after.count() > 0;
  const auto kill_at = start + options.kill_after;
  bool kill_sent = false;
  bool hung = false;
  auto send_kill = [&] {
    if (!kill_sent) ::kill(pid, SIGKILL);
    kill_sent = true;
  };

  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  std::vector<char> buf(1 << 20);
  while (open_fds > 0) {
    auto now = std::chrono::steady_clock::now();
    if (!kill_sent && has_deadline && now >= kill_at) send_kill();
    if (!kill_sent && options.poll && options.poll(pid)) send_kill();
    if (!kill_sent && now >= hang_limit) {
      hung = true;
      send_kill();
    }
    int timeout_ms = 100;
    if (options.poll) timeout_ms = 1;
    if (!kill_sent && has_deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kill_at - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, timeout_ms));
    }
    int n = ::poll(fds, 2, timeout_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "poll: " << std::strerror(errno);
      send_kill();
      break;
    }
    if (n == 0 && has_deadline && !kill_sent && timeout_ms == 0) {
      // A sub-millisecond wait is left: spin on the clock, which is what a
      // kill "at a random moment" needs.
      std::this_thread::yield();
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf.data(), buf.size());
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      std::string_view piece(buf.data(), static_cast<size_t>(got));
      if (i == 0 && options.stdout_sink) {
        options.stdout_sink(piece);
      } else {
        (i == 0 ? result.out : result.err).append(piece);
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  struct rusage usage = {};
  while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  result.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * kKiB;  // KiB on Linux
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (hung) ADD_FAILURE() << "hung for 10 minutes and was killed: " << result.Describe();
  if (std::getenv("CAIRN_TEST_VERBOSE") != nullptr) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::steady_clock::now() - start)
                  .count();
    std::fprintf(stderr, "[%6lld ms] %s -> %s %d\n", static_cast<long long>(ms),
                 result.command.c_str(), result.killed() ? "signal" : "exit",
                 result.killed() ? result.term_signal : result.exit_code);
  }
  return result;
}

nlohmann::json ParseJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    ADD_FAILURE() << "not JSON:\n" << text.substr(0, 2000);
    return nullptr;
  }
  return j;
}

std::vector<std::string> ReportLines(const std::string& text) {
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

// --- images ----------------------------------------------------------------

ImageWriter::ImageWriter(std::string path, uint64_t size, uint64_t seed)
    : path_(std::move(path)), size_(size), rng_(seed) {
  fd_ = OpenOrFail(path_, O_RDWR | O_CREAT | O_TRUNC);
  if (fd_ >= 0 && ::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    ADD_FAILURE() << "ftruncate " << path_ << ": " << std::strerror(errno);
  }
}

ImageWriter::~ImageWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ImageWriter::Write(uint64_t offset, const std::string& data) {
  if (offset + data.size() > size_) {
    ADD_FAILURE() << path_ << ": region [" << offset << ", +" << data.size()
                  << ") is beyond the image size " << size_;
    return;
  }
  PwriteAll(fd_, data.data(), data.size(), offset, path_);
}

ImageWriter& ImageWriter::Zeros(uint64_t offset, uint64_t len) { return Fill(offset, len, 0); }

ImageWriter& ImageWriter::Fill(uint64_t offset, uint64_t len, uint8_t byte) {
  for (uint64_t done = 0; done < len;) {
    uint64_t n = std::min<uint64_t>(len - done, 8 * kMiB);
    Write(offset + done, std::string(n, static_cast<char>(byte)));
    done += n;
  }
  return *this;
}

ImageWriter& ImageWriter::Random(uint64_t offset, uint64_t len) {
  for (uint64_t done = 0; done < len;) {
    uint64_t n = std::min<uint64_t>(len - done, 8 * kMiB);
    Write(offset + done, RandomBytes(rng_, n));
    done += n;
  }
  return *this;
}

ImageWriter& ImageWriter::Text(uint64_t offset, uint64_t len) {
  static constexpr const char* kWords[] = {
      "backup ", "restore ", "verify ", "chunk ",  "index ", "manifest ", "snapshot ", "datastore ",
      "cairn ",  "zstd ",    "sha256 ", "crc32c ", "disk ",  "image ",    "\n"};
  std::string s;
  s.reserve(len + 16);
  while (s.size() < len) s += kWords[rng_() % std::size(kWords)];
  s.resize(len);
  Write(offset, s);
  return *this;
}

ImageWriter& ImageWriter::Copy(uint64_t from, uint64_t offset, uint64_t len) {
  std::string data(len, '\0');
  if (PreadAll(fd_, data.data(), len, from) != len) {
    ADD_FAILURE() << path_ << ": cannot read [" << from << ", +" << len << ")";
  }
  Write(offset, data);
  return *this;
}

void WriteRandomAt(const std::string& path, uint64_t offset, uint64_t len, uint64_t seed) {
  int fd = OpenOrFail(path, O_WRONLY);
  if (fd < 0) return;
  std::mt19937_64 rng(seed);
  std::string data = RandomBytes(rng, len);
  PwriteAll(fd, data.data(), data.size(), offset, path);
  ::close(fd);
}

// --- files -----------------------------------------------------------------

std::string CompareFiles(const std::string& a, const std::string& b) {
  if (!Exists(a)) return a + " does not exist";
  if (!Exists(b)) return b + " does not exist";
  uint64_t size_a = FileSize(a), size_b = FileSize(b);
  if (size_a != size_b) {
    return a + " has " + std::to_string(size_a) + " bytes, " + b + " has " + std::to_string(size_b);
  }
  int fa = OpenOrFail(a, O_RDONLY), fb = OpenOrFail(b, O_RDONLY);
  std::string result;
  std::string ba(8 * kMiB, '\0'), bb(8 * kMiB, '\0');
  for (uint64_t off = 0; fa >= 0 && fb >= 0 && off < size_a && result.empty();) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(ba.size(), size_a - off));
    size_t na = PreadAll(fa, ba.data(), want, off);
    size_t nb = PreadAll(fb, bb.data(), want, off);
    if (na != want || nb != want) {
      result = "short read at offset " + std::to_string(off);
      break;
    }
    if (std::memcmp(ba.data(), bb.data(), want) != 0) {
      size_t i = 0;
      while (ba[i] == bb[i]) ++i;
      result = "first difference at offset " + std::to_string(off + i);
    }
    off += want;
  }
  if (fa >= 0) ::close(fa);
  if (fb >= 0) ::close(fb);
  return result;
}

StreamComparer::StreamComparer(const std::string& expected_path) {
  fd_ = OpenOrFail(expected_path, O_RDONLY);
  file_size_ = FileSize(expected_path);
}

StreamComparer::~StreamComparer() {
  if (fd_ >= 0) ::close(fd_);
}

void StreamComparer::Feed(std::string_view piece) {
  if (!error_.empty() || fd_ < 0) return;
  if (pos_ + piece.size() > file_size_) {
    error_ = "stream is longer than the " + std::to_string(file_size_) + "-byte file";
    return;
  }
  buf_.resize(piece.size());
  if (PreadAll(fd_, buf_.data(), piece.size(), pos_) != piece.size()) {
    error_ = "cannot read the expected file at " + std::to_string(pos_);
    return;
  }
  if (std::memcmp(buf_.data(), piece.data(), piece.size()) != 0) {
    size_t i = 0;
    while (buf_[i] == piece[i]) ++i;
    error_ = "stream differs from the file at offset " + std::to_string(pos_ + i);
    return;
  }
  pos_ += piece.size();
}

std::string StreamComparer::Result() const {
  if (!error_.empty()) return error_;
  if (pos_ != file_size_) {
    return "stream ended after " + std::to_string(pos_) + " of " + std::to_string(file_size_) +
           " bytes";
  }
  return "";
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

uint64_t FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat " << path << ": " << std::strerror(errno);
    return 0;
  }
  return static_cast<uint64_t>(st.st_size);
}

uint64_t AllocatedBytes(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    ADD_FAILURE() << "stat " << path << ": " << std::strerror(errno);
    return 0;
  }
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

std::string ReadFile(const std::string& path) {
  int fd = OpenOrFail(path, O_RDONLY);
  if (fd < 0) return "";
  std::string data(FileSize(path), '\0');
  data.resize(PreadAll(fd, data.data(), data.size(), 0));
  ::close(fd);
  return data;
}

void WriteFile(const std::string& path, std::string_view data) {
  int fd = OpenOrFail(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd < 0) return;
  PwriteAll(fd, data.data(), data.size(), 0, path);
  ::close(fd);
}

void WriteChunkImage(const std::string& path, const std::vector<uint64_t>& seeds) {
  std::string data;
  data.reserve(seeds.size() * kChunk);
  for (uint64_t seed : seeds) {
    std::mt19937_64 rng(seed);
    for (uint64_t i = 0; i < kChunk / sizeof(uint64_t); ++i) {
      uint64_t v = rng();
      data.append(reinterpret_cast<const char*>(&v), sizeof v);
    }
  }
  WriteFile(path, data);
}

void FlipBit(const std::string& path, uint64_t offset, int bit) {
  int fd = OpenOrFail(path, O_RDWR);
  if (fd < 0) return;
  char c = 0;
  if (PreadAll(fd, &c, 1, offset) != 1) {
    ADD_FAILURE() << path << ": no byte at offset " << offset;
  } else {
    c = static_cast<char>(c ^ (1 << bit));
    PwriteAll(fd, &c, 1, offset, path);
  }
  ::close(fd);
}

void TruncateFile(const std::string& path, uint64_t size) {
  if (::truncate(path.c_str(), static_cast<off_t>(size)) != 0) {
    ADD_FAILURE() << "truncate " << path << ": " << std::strerror(errno);
  }
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  if (ec) ADD_FAILURE() << "list " << dir << ": " << ec.message();
  std::sort(names.begin(), names.end());
  return names;
}

// --- datastore layout --------------------------------------------------------

std::map<std::string, std::string> ChunkFiles(const std::string& store) {
  std::map<std::string, std::string> chunks;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(store + "/.chunks", ec)) {
    if (!e.is_regular_file()) continue;
    std::string name = e.path().filename();
    bool is_id = name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
                   return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
                 });
    if (is_id) chunks[name] = e.path().string();
  }
  if (ec) ADD_FAILURE() << "walk " << store << "/.chunks: " << ec.message();
  return chunks;
}

std::vector<std::string> IndexDigests(const std::string& fidx_path) {
  constexpr size_t kHeader = 4096;
  std::string data = ReadFile(fidx_path);
  std::vector<std::string> ids;
  if (data.size() < kHeader || (data.size() - kHeader) % 32 != 0) {
    ADD_FAILURE() << fidx_path << ": not a fixed index of " << data.size() << " bytes";
    return ids;
  }
  for (size_t off = kHeader; off < data.size(); off += 32) {
    ids.push_back(ToHex(reinterpret_cast<const unsigned char*>(data.data() + off), 32));
  }
  return ids;
}

std::string SnapshotDir(const std::string& store, const std::string& snapshot) {
  return store + "/" + snapshot;
}

std::string Sha256Hex(std::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    ADD_FAILURE() << "EVP_Digest failed";
  }
  return ToHex(md, len);
}

std::string ZeroChunkId() { return Sha256Hex(std::string(kChunk, '\0')); }

}  // namespace cairn::cli_test
