// Logging facade. Libraries log through a Logger passed in their Options,
// never through a global; the CLI builds a StderrLogger. User-facing output
// (results, progress, JSON) is not logging and goes to stdout directly.
//
// Thread safety: Log() may be called from any thread.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "base/mutex.h"

namespace cairn {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

class Logger {
 public:
  virtual ~Logger() = default;
  virtual void Log(LogLevel level, std::string_view message) = 0;
  virtual bool Enabled(LogLevel level) const = 0;

  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... args) {
    Emit(LogLevel::kInfo, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warn(fmt::format_string<Args...> f, Args&&... args) {
    Emit(LogLevel::kWarning, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... args) {
    Emit(LogLevel::kError, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... args) {
    Emit(LogLevel::kDebug, f, std::forward<Args>(args)...);
  }

 private:
  template <typename... Args>
  void Emit(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
    if (Enabled(level)) Log(level, fmt::format(f, std::forward<Args>(args)...));
  }
};

// How lines on stderr look. kPlain: "cairn: warning: ..." (a terminal, a
// cron mail). kJournal: "<4>message", the priority prefix of sd-daemon(3)
// that journald turns into the entry's priority, with no name or time of
// our own (the journal records both); for a service whose stderr is the
// journal (StderrIsJournal()).
enum class LogStyle { kPlain, kJournal };

// Lines on stderr at `min_level` and above (spdlog).
std::unique_ptr<Logger> NewStderrLogger(LogLevel min_level, LogStyle style = LogStyle::kPlain);

// True when stderr is connected to the journal: $JOURNAL_STREAM, which
// systemd sets for a service, names stderr's device and inode.
bool StderrIsJournal();

// Appends lines "2026-12-03T20:11:04.123Z warning: message" to a file,
// flushed line by line; Reopen() opens the path again (after logrotate
// moved the file away: `cairn serve` calls it on SIGHUP).
//
// Thread safety: Log and Reopen may be called from any thread.
class FileLogger final : public Logger {
 public:
  // Opens (creates, mode 0640) `path` for appending.
  static std::unique_ptr<FileLogger> Open(const std::string& path, LogLevel min_level,
                                          std::string* error);
  ~FileLogger() override;
  void Log(LogLevel level, std::string_view message) override;
  bool Enabled(LogLevel level) const override { return level >= min_level_; }
  // False (with errno set) when the path cannot be opened; the old file
  // is kept then.
  bool Reopen();
  const std::string& path() const { return path_; }

 private:
  FileLogger(std::string path, LogLevel min_level, std::FILE* file)
      : path_(std::move(path)), min_level_(min_level), file_(file) {}
  const std::string path_;
  const LogLevel min_level_;
  Mutex mu_;
  std::FILE* file_ GUARDED_BY(mu_);
};
// Discards everything (tests, benchmarks).
std::unique_ptr<Logger> NewNullLogger();

}  // namespace cairn
