// AuditLog: one line per refused request of `cairn serve`, in
// STATE_DIR/audit.log (mode 0600): JSON with the time, the client's
// address, the token's name (as presented: never its secret), the method
// and path, the status answered and why. Also a warning in the server's
// log. The file is rotated to audit.log.1 past max_bytes, so a flood of
// refusals costs bounded disk.
//
// LoginLimiter: failed logins per client address. Past `max_failures`
// within a minute, every login attempt from the address is refused (429)
// without being checked, until the minute is over: guessing costs time,
// and a flood of bad credentials costs the server (and its logs) little.
//
// Thread safety: all methods of both may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "base/logging.h"
#include "base/mutex.h"

namespace cairn::server {

struct AuditEntry {
  std::string peer;    // "127.0.0.1:41234"
  std::string token;   // the token's name, or "" (none, or not readable)
  std::string method;  // "GET"
  std::string path;    // "/api/v1/stores/main/chunk/…" (no query)
  int status = 0;
  std::string reason;  // the answer's message, or the log's finer reason
};

class AuditLog {
 public:
  // `path` "": no file, the server's log only.
  AuditLog(Logger& logger, std::string path, uint64_t max_bytes = 16 << 20)
      : logger_(logger), path_(std::move(path)), max_bytes_(max_bytes) {}
  void Record(const AuditEntry& entry);
  const std::string& path() const { return path_; }

 private:
  Logger& logger_;
  const std::string path_;
  const uint64_t max_bytes_;
  Mutex mu_;  // serializes appends and the rotation
};

class LoginLimiter {
 public:
  explicit LoginLimiter(int max_failures, std::chrono::seconds window = std::chrono::seconds(60))
      : max_failures_(max_failures), window_(window) {}
  // Seconds until `address` may try again; 0 when it may now.
  int64_t RetryAfter(const std::string& address);
  void Failed(const std::string& address);

 private:
  struct Window {
    std::chrono::steady_clock::time_point start;
    int failures = 0;
  };
  const int max_failures_;
  const std::chrono::seconds window_;
  Mutex mu_;
  std::map<std::string, Window> windows_ GUARDED_BY(mu_);
};

}  // namespace cairn::server
