// Thin POSIX file helpers for the data generator. The generator is a
// stand-alone tool that needs symlinks and fixed timestamps, which cairn's
// Env does not offer; errors still come back as cairn Status values.
//
// Thread safety: a GenFile is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/status.h"

namespace cairn::bench {

class GenFile {
 public:
  // Creates or truncates `path` for reading and writing.
  static Result<std::unique_ptr<GenFile>> Create(const std::string& path);
  ~GenFile();  // closes, ignoring errors; call Close() to see them

  Status WriteAt(uint64_t offset, std::span<const uint8_t> data);
  Status ReadAt(uint64_t offset, std::span<uint8_t> data);  // all of it, or an error
  Status Truncate(uint64_t size);
  Status Close();

 private:
  GenFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// Sets atime and mtime of `path` (not following a symlink) to `unix_seconds`.
Status SetTimes(const std::string& path, int64_t unix_seconds);

}  // namespace cairn::bench
