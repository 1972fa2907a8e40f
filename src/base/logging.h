// Logging facade. Libraries log through a Logger passed in their Options,
// never through a global; the CLI builds a StderrLogger. User-facing output
// (results, progress, JSON) is not logging and goes to stdout directly.
//
// Thread safety: Log() may be called from any thread.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include <fmt/format.h>

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

// Lines "cairn: warning: ..." on stderr at `min_level` and above (spdlog).
std::unique_ptr<Logger> NewStderrLogger(LogLevel min_level);
// Discards everything (tests, benchmarks).
std::unique_ptr<Logger> NewNullLogger();

}  // namespace cairn
