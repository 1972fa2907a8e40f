#include "base/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace cairn {
namespace {

class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(LogLevel min_level)
      : min_level_(min_level),
        logger_(std::make_shared<spdlog::logger>(
            "cairn", std::make_shared<spdlog::sinks::stderr_sink_mt>())) {
    logger_->set_pattern("cairn: %l: %v");
    logger_->set_level(spdlog::level::trace);
  }

  void Log(LogLevel level, std::string_view message) override {
    if (!Enabled(level)) return;
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
  std::shared_ptr<spdlog::logger> logger_;
};

class NullLogger final : public Logger {
 public:
  void Log(LogLevel, std::string_view) override {}
  bool Enabled(LogLevel) const override { return false; }
};

}  // namespace

std::unique_ptr<Logger> NewStderrLogger(LogLevel min_level) {
  return std::make_unique<StderrLogger>(min_level);
}
std::unique_ptr<Logger> NewNullLogger() { return std::make_unique<NullLogger>(); }

}  // namespace cairn
