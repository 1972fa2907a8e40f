#include "base/logging.h"

#include <fcntl.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace cairn {
namespace {

class StderrLogger final : public Logger {
 public:
  StderrLogger(LogLevel min_level, LogStyle style)
      : min_level_(min_level),
        style_(style),
        logger_(std::make_shared<spdlog::logger>(
            "cairn", std::make_shared<spdlog::sinks::stderr_sink_mt>())) {
    logger_->set_pattern(style == LogStyle::kJournal ? "%v" : "cairn: %l: %v");
    logger_->set_level(spdlog::level::trace);
  }

  void Log(LogLevel level, std::string_view message) override {
    if (!Enabled(level)) return;
    if (style_ == LogStyle::kJournal) {
      // sd-daemon(3): <7> debug, <6> info, <4> warning, <3> error.
      const char* prefix = level == LogLevel::kDebug     ? "<7>"
                           : level == LogLevel::kInfo    ? "<6>"
                           : level == LogLevel::kWarning ? "<4>"
                                                         : "<3>";
      logger_->info("{}{}", prefix, message);
      return;
    }
    switch (level) {
      case LogLevel::kDebug: logger_->debug(message); break;
      case LogLevel::kInfo: logger_->info(message); break;
      case LogLevel::kWarning: logger_->warn(message); break;
      case LogLevel::kError: logger_->error(message); break;
    }
  }
  bool Enabled(LogLevel level) const override { return level >= min_level_; }

 private:
  LogLevel min_level_;
  LogStyle style_;
  std::shared_ptr<spdlog::logger> logger_;
};

std::FILE* OpenAppend(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "a");
  if (f == nullptr) ::close(fd);
  return f;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

class NullLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
  bool Enabled(LogLevel) const override { return false; }
};

}  // namespace

std::unique_ptr<Logger> NewStderrLogger(LogLevel min_level, LogStyle style) {
  return std::make_unique<StderrLogger>(min_level, style);
}

bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr || *stream == '\0') return false;
  struct stat st;
  if (::fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) return false;
  return dev == static_cast<unsigned long long>(st.st_dev) &&
         ino == static_cast<unsigned long long>(st.st_ino);
}

std::unique_ptr<FileLogger> FileLogger::Open(const std::string& path, LogLevel min_level,
                                             std::string* error) {
  std::FILE* f = OpenAppend(path);
  if (f == nullptr) {
    *error = fmt::format("log file {}: {}", path, std::strerror(errno));
    return nullptr;
  }
  return std::unique_ptr<FileLogger>(new FileLogger(path, min_level, f));
}

FileLogger::~FileLogger() {
  if (file_ != nullptr) std::fclose(file_);
}

void FileLogger::Log(LogLevel level, std::string_view message) {
  if (!Enabled(level)) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm;
  ::gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  MutexLock lock(mu_);
  fmt::print(file_, "{}.{:03d}Z {}: {}\n", stamp, static_cast<int>(ms), LevelName(level), message);
  std::fflush(file_);
}

bool FileLogger::Reopen() {
  std::FILE* f = OpenAppend(path_);
  if (f == nullptr) return false;
  MutexLock lock(mu_);
  std::fclose(file_);
  file_ = f;
  return true;
}
std::unique_ptr<Logger> NewNullLogger() { return std::make_unique<NullLogger>(); }

}  // namespace cairn
