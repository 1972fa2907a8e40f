#include "server/audit_log.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>

#include "base/unique_fd.h"
#include "datastore/snapshot_ref.h"

namespace cairn::server {

void AuditLog::Record(const AuditEntry& e) {
  logger_.Warn("refused: {} {} {} from {} (token '{}'): {}", e.status, e.method, e.path, e.peer,
               e.token, e.reason);
  if (path_.empty()) return;
  nlohmann::json line = {{"time", datastore::FormatRfc3339(std::time(nullptr))},
                         {"peer", e.peer},
                         {"token", e.token},
                         {"method", e.method},
                         {"path", e.path.substr(0, 512)},
                         {"status", e.status},
                         {"reason", e.reason.substr(0, 1024)}};
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  MutexLock lock(mu_);
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= max_bytes_) {
    std::string old = path_ + ".1";
    if (::rename(path_.c_str(), old.c_str()) != 0) {
      logger_.Warn("audit log {}: rotating: {}", path_, std::strerror(errno));
    }
  }
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0 ||
      ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
    logger_.Warn("audit log {}: {}", path_, std::strerror(errno));
  }
}

int64_t LoginLimiter::RetryAfter(const std::string& address) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  auto it = windows_.find(address);
  if (it == windows_.end()) return 0;
  auto elapsed = now - it->second.start;
  if (elapsed >= window_) {
    windows_.erase(it);
    return 0;
  }
  if (it->second.failures < max_failures_) return 0;
  return std::chrono::duration_cast<std::chrono::seconds>(window_ - elapsed).count() + 1;
}

void LoginLimiter::Failed(const std::string& address) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  // Old windows go, so addresses that tried once cost nothing for long.
  if (windows_.size() > 4096) {
    for (auto it = windows_.begin(); it != windows_.end();) {
      it = now - it->second.start >= window_ ? windows_.erase(it) : std::next(it);
    }
  }
  Window& w = windows_[address];
  if (w.failures == 0 || now - w.start >= window_) w = Window{now, 0};
  ++w.failures;
}

}  // namespace cairn::server
