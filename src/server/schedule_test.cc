#include "server/schedule.h"

#include <stdlib.h>
#include <time.h>

#include <gtest/gtest.h>

namespace cairn::server {
namespace {

class ScheduleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = getenv("TZ");
    saved_ = tz ? tz : "";
    had_ = tz != nullptr;
    setenv("TZ", "UTC", 1);
    tzset();
  }
  void TearDown() override {
    if (had_) setenv("TZ", saved_.c_str(), 1); else unsetenv("TZ");
    tzset();
  }
  std::string saved_;
  bool had_ = false;
};

// 2026-12-04 18:53:20 UTC, a Friday.
constexpr int64_t kFri = 1796410400;

int64_t Next(const std::string& text, int64_t after) {
  auto s = Schedule::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
  return s.ok() ? s->Next(after) : -1;
}

TEST_F(ScheduleTest, CronAndShorthands) {
  const int64_t day = kFri - kFri % 86400;  // 2026-12-04 00:00
  EXPECT_EQ(Next("* * * * *", kFri), kFri - kFri % 60 + 60);
  EXPECT_EQ(Next("hourly", kFri), kFri - kFri % 3600 + 3600);
  EXPECT_EQ(Next("@daily", kFri), day + 86400);
  EXPECT_EQ(Next("*/15 * * * *", kFri), day + 19 * 3600);  // 19:00
  EXPECT_EQ(Next("30 2 * * *", kFri), day + 86400 + 2 * 3600 + 1800);
  EXPECT_EQ(Next("0 3 * * mon-fri", kFri), day + 3 * 86400 + 3 * 3600);  // Monday 7th
  EXPECT_EQ(Next("0 3 * * 7", kFri), day + 2 * 86400 + 3 * 3600);        // Sunday 6th
  EXPECT_EQ(Next("0 0 1 * *", kFri), day + 28 * 86400);                  // 2027-01-01
  EXPECT_EQ(Next("weekly", kFri), day + 3 * 86400);
  // Day of month and day of week both restricted: either matches.
  EXPECT_EQ(Next("0 0 5 * sun", kFri), day + 86400);
  EXPECT_EQ(Next("0 0 30 2 *", kFri), 0);  // never
}

TEST_F(ScheduleTest, Systemd) {
  const int64_t day = kFri - kFri % 86400;
  EXPECT_EQ(Next("*:0/15", kFri), day + 19 * 3600);
  EXPECT_EQ(Next("*:0/1", kFri), kFri - kFri % 60 + 60);  // every minute
  EXPECT_EQ(Next("02:30", kFri), day + 86400 + 2 * 3600 + 1800);
  EXPECT_EQ(Next("*-*-* 21:00:00", kFri), day + 21 * 3600);
  EXPECT_EQ(Next("mon..fri 03:00", kFri), day + 3 * 86400 + 3 * 3600);
  EXPECT_EQ(Next("sat,sun 1..2:00", kFri), day + 86400 + 3600);
  EXPECT_EQ(Next("fri 18:50,55", kFri), day + 18 * 3600 + 55 * 60);
}

TEST_F(ScheduleTest, RefusesWhatItCannotRead) {
  for (const char* bad : {"", "sometimes", "61 * * * *", "* * * *", "*:0/0", "5-1 * * * *",
                          "0 0 * * funday", "12:00:30", "a:b", "0 0 0 * *"}) {
    auto s = Schedule::Parse(bad);
    EXPECT_FALSE(s.ok()) << bad;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

}  // namespace
}  // namespace cairn::server
