// Helpers shared by the unit tests (src/**/*_test.cc): a temporary
// directory that removes itself, deterministic random bytes, and small file
// helpers that fail the test instead of returning a Status.
//
// Thread safety: TempDir is used by one test; RandomBytes is pure.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::test_util {

// Where temporary directories go: $CAIRN_TEST_TMPDIR, else /dev/shm when it
// is a writable directory (tmpfs: fsync and syncfs cost nothing there, and
// on a disk busy with other work a single syncfs can take seconds), else
// $TMPDIR or /tmp.
inline std::filesystem::path TempRoot() {
  if (const char* dir = std::getenv("CAIRN_TEST_TMPDIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

// A fresh directory under TempRoot(), removed with its contents when the
// object is destroyed.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (TempRoot() / "cairn-unit-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` under the directory (not created).
  std::string Join(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// `n` pseudo-random bytes; the same seed gives the same bytes.
inline Bytes RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = rng();
    for (int k = 0; k < 8; ++k) out[i + k] = static_cast<uint8_t>(w >> (8 * k));
  }
  uint64_t w = rng();
  for (; i < n; ++i, w >>= 8) out[i] = static_cast<uint8_t>(w);
  return out;
}

inline void WriteFileOrFail(const std::string& path, ByteSpan data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(f.good()) << "writing " << path;
}

inline Bytes ReadFileOrFail(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << "reading " << path;
  return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

}  // namespace cairn::test_util

// gtest printing, so failures say what the error was.
namespace cairn {
inline void PrintTo(const Status& s, std::ostream* os) { *os << s.ToString(); }
inline void PrintTo(StatusCode c, std::ostream* os) { *os << StatusCodeName(c); }
}  // namespace cairn

namespace cairn::test_util {
inline Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}
// The code of a Status or Result, for EXPECT_EQ(CodeOf(x), StatusCode::kDataLoss).
template <typename T>
StatusCode CodeOf(const T& s) {
  return StatusOf(s).code();
}

// For test sources that read asynchronously: runs each read on a thread of
// its own, as an object store's reads complete on its client's thread, and
// joins them all when destroyed (make it a source's last member, so the
// reads end before the rest of the source goes).
class ThreadPerRead {
 public:
  void Run(std::function<void()> read) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(read));
  }

 private:
  std::mutex mu_;
  std::vector<std::jthread> threads_;
};
}  // namespace cairn::test_util

// Assert/expect that a Status or Result is OK, printing the error otherwise.
#define CAIRN_ASSERT_OK(expr)                                                    \
  do {                                                                           \
    const auto& cairn_assert_v_ = (expr);                                        \
    ASSERT_TRUE(cairn_assert_v_.ok())                                            \
        << ::cairn::test_util::StatusOf(cairn_assert_v_).ToString();             \
  } while (0)
#define CAIRN_EXPECT_OK(expr)                                                    \
  do {                                                                           \
    const auto& cairn_expect_v_ = (expr);                                        \
    EXPECT_TRUE(cairn_expect_v_.ok())                                            \
        << ::cairn::test_util::StatusOf(cairn_expect_v_).ToString();             \
  } while (0)
