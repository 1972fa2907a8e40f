// FaultInjectionEnv: an EnvWrapper for tests and benchmarks that makes the
// file system misbehave on demand: a disk that fills up after N bytes
// (ENOSPC), reads that fail with EIO for paths containing a pattern, and
// reads or writes slowed by a fixed latency (slow storage: `restore
// --inject-write-latency` makes a slow target with it).
//
// Thread safety: safe for concurrent use; settings may change while files
// are open.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/env.h"
#include "base/mutex.h"

namespace cairn {

class FaultInjectionEnv final : public EnvWrapper {
 public:
  explicit FaultInjectionEnv(Env* target) : EnvWrapper(target) {}
  // Owns its target (the cairn binary's test hook wraps the process's Env:
  // cli/cli_util.h, NewProcessEnv).
  explicit FaultInjectionEnv(std::unique_ptr<Env> owned)
      : EnvWrapper(owned.get()), owned_(std::move(owned)) {}

  // Writes fail with ResourceExhausted ("No space left on device") once
  // `bytes` more bytes have been written through this Env. <0 disables.
  void SetWriteBudget(int64_t bytes) { write_budget_.store(bytes); }
  // Reads (ReadAt, i.e. pread) of files whose path contains `pattern` fail
  // with DataLoss "read PATH: Input/output error (injected)", as a real EIO
  // does through PosixEnv (IsIoError is true for both). Opens, Stat and
  // writes still work, as on a disk with a bad sector. Empty disables.
  void FailReadsMatching(std::string pattern);
  // Creating a file, directory, symlink, node or hard link through a Dir
  // (OpenDir) at a path containing `pattern` fails with DataLoss (EIO).
  // Empty disables.
  void FailCreatesMatching(std::string pattern);
  // Every ReadAt sleeps this long first.
  void SetReadLatencyMicros(int64_t micros) { read_latency_us_.store(micros); }
  // Every WriteAt and Append sleeps this long first.
  void SetWriteLatencyMicros(int64_t micros) { write_latency_us_.store(micros); }

  // Counters.
  uint64_t bytes_written() const { return bytes_written_.load(); }

  Result<std::unique_ptr<ReadableFile>> OpenReadable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> OpenWritable(const std::string& path,
                                                     OpenMode mode) override;
  // Directories whose files, reads, writes and creations are all subject to
  // the settings above.
  Result<std::unique_ptr<Dir>> OpenDir(const std::string& path) override;

  // Internal, used by the wrapped files.
  Status ChargeWrite(const std::string& path, size_t bytes);
  Status CheckRead(const std::string& path);
  Status CheckCreate(const std::string& path);

 private:
  std::unique_ptr<Env> owned_;  // null unless constructed owning
  std::atomic<int64_t> write_budget_{-1};
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<int64_t> read_latency_us_{0};
  std::atomic<int64_t> write_latency_us_{0};
  Mutex mu_;
  std::string read_fail_pattern_ GUARDED_BY(mu_);
  std::string create_fail_pattern_ GUARDED_BY(mu_);
};

}  // namespace cairn
