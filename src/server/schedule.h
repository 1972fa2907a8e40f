// When a server sync job runs (docs/SERVER.md, "Sync jobs"): a calendar
// event in cron syntax ("MIN HOUR DOM MONTH DOW", with *, lists, ranges
// A-B and steps /N; DOW 0-7 or sun..sat) or in systemd's calendar syntax
// as PBS writes schedules ("[WEEKDAYS] HH:MM[:SS]" with *, lists, ranges
// A..B and steps A/N; WEEKDAYS like mon..fri or sat,sun; an optional
// "*-*-*" date), or a shorthand: minutely, hourly, daily, weekly, monthly
// (also with a leading @). Times are the server's local time; seconds are
// not kept (a schedule fires at the start of a minute).
//
// Thread safety: a Schedule is immutable once parsed.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace cairn::server {

class Schedule {
 public:
  // InvalidArgument naming the schedule and the field for anything else.
  static Result<Schedule> Parse(std::string_view text);

  // The first minute strictly after `after` (Unix seconds) that the
  // schedule names, in local time; 0 when none comes within five years
  // (like "0 0 30 2 *").
  int64_t Next(int64_t after) const;

  const std::string& text() const { return text_; }

 private:
  bool DayMatches(int mday, int wday) const;

  std::string text_;
  std::bitset<60> minute_;
  std::bitset<24> hour_;
  std::bitset<32> mday_;   // 1..31
  std::bitset<13> month_;  // 1..12
  std::bitset<7> wday_;    // 0 = Sunday
  bool mday_any_ = true;
  bool wday_any_ = true;
};

}  // namespace cairn::server
