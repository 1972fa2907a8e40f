#include "base/logging.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace cairn {
namespace {

// Records what reaches Log(), at or above `min`.
class RecordingLogger final : public Logger {
 public:
  explicit RecordingLogger(LogLevel min) : min_(min) {}
  void Log(LogLevel level, std::string_view message) override {
    lines.emplace_back(level, std::string(message));
  }
  bool Enabled(LogLevel level) const override { return level >= min_; }

  std::vector<std::pair<LogLevel, std::string>> lines;

 private:
  LogLevel min_;
};

TEST(LoggingTest, FormatsAndFiltersByLevel) {
  RecordingLogger log(LogLevel::kInfo);
  log.Debug("hidden {}", 1);
  log.Info("chunk {} of {}", 3, "vm/100");
  log.Warn("{:.1f} MiB/s", 12.345);
  log.Error("failed: {}", std::string("disk full"));
  ASSERT_EQ(log.lines.size(), 3u);
  EXPECT_EQ(log.lines[0], std::make_pair(LogLevel::kInfo, std::string("chunk 3 of vm/100")));
  EXPECT_EQ(log.lines[1], std::make_pair(LogLevel::kWarning, std::string("12.3 MiB/s")));
  EXPECT_EQ(log.lines[2], std::make_pair(LogLevel::kError, std::string("failed: disk full")));
}

TEST(LoggingTest, NullLoggerDiscardsEverything) {
  auto log = NewNullLogger();
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning, LogLevel::kError}) {
    EXPECT_FALSE(log->Enabled(l));
  }
  log->Error("nothing {}", 1);  // must not crash
}

TEST(LoggingTest, StderrLoggerHonoursMinimumLevel) {
  auto log = NewStderrLogger(LogLevel::kWarning);
  EXPECT_FALSE(log->Enabled(LogLevel::kDebug));
  EXPECT_FALSE(log->Enabled(LogLevel::kInfo));
  EXPECT_TRUE(log->Enabled(LogLevel::kWarning));
  EXPECT_TRUE(log->Enabled(LogLevel::kError));
  ::testing::internal::CaptureStderr();
  log->Warn("disk {} is slow", "sda");
  log->Info("not shown");
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cairn: warning: disk sda is slow"), std::string::npos) << err;
  EXPECT_EQ(err.find("not shown"), std::string::npos) << err;
}

}  // namespace
}  // namespace cairn
