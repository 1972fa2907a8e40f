#include "server/schedule.h"

#include <time.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <vector>

#include <fmt/format.h>

namespace cairn::server {
namespace {

constexpr const char* kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    size_t at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

// One field's syntax: cron ranges are A-B, systemd's A..B; weekday names
// are taken where `days` is set (three letters, any case).
struct FieldSyntax {
  std::string_view range;
  bool days = false;
};

class FieldParser {
 public:
  FieldParser(std::string_view schedule, std::string_view field, int lo, int hi, FieldSyntax syntax)
      : schedule_(schedule), field_(field), lo_(lo), hi_(hi), syntax_(syntax) {}

  Status Error(std::string_view why) const {
    return InvalidArgumentError(fmt::format("schedule \"{}\": {} field: {}", schedule_, field_, why));
  }

  Result<int> Value(std::string_view text) const {
    if (syntax_.days && text.size() >= 3) {
      std::string lower(text.substr(0, 3));
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      for (int d = 0; d < 7; ++d) {
        if (lower == kDays[d]) return d;
      }
    }
    int v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      return Error(fmt::format("'{}' is not a number{}", text, syntax_.days ? " or a weekday" : ""));
    }
    if (syntax_.days && v == 7) v = 0;  // cron: 7 is Sunday too
    if (v < lo_ || v > hi_) return Error(fmt::format("{} is not within {}..{}", v, lo_, hi_));
    return v;
  }

  // Sets the bits of `text` (a comma list); *any = the field was "*".
  template <size_t N>
  Status Parse(std::string_view text, std::bitset<N>* bits, bool* any) const {
    *any = text == "*";
    for (std::string_view item : Split(text, ',')) {
      if (item.empty()) return Error("an empty list item");
      int step = 1;
      bool stepped = false;  // "A/S": from A to the end, every S
      if (size_t slash = item.find('/'); slash != std::string_view::npos) {
        std::string_view s = item.substr(slash + 1);
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
        if (s.empty() || ec != std::errc() || end != s.data() + s.size() || step < 1) {
          return Error(fmt::format("bad step '{}'", s));
        }
        item = item.substr(0, slash);
        stepped = true;
        *any = false;
      }
      int from = lo_, to = hi_;
      if (item != "*") {
        size_t dots = item.find(syntax_.range);
        CAIRN_ASSIGN_OR_RETURN(from, Value(item.substr(0, dots)));
        if (dots != std::string_view::npos) {
          CAIRN_ASSIGN_OR_RETURN(to, Value(item.substr(dots + syntax_.range.size())));
          if (syntax_.days && to == 0 && from > 0) to = 7;  // mon..sun
        } else if (!stepped) {
          to = from;
        }
      }
      if (to < from) return Error(fmt::format("range '{}' runs backwards", item));
      for (int v = from; v <= to; v += step) bits->set(static_cast<size_t>(syntax_.days ? v % 7 : v));
    }
    return Status::Ok();
  }

 private:
  std::string_view schedule_, field_;
  int lo_, hi_;
  FieldSyntax syntax_;
};

std::string_view Shorthand(std::string_view text) {
  if (text.starts_with('@')) text.remove_prefix(1);
  if (text == "minutely") return "* * * * *";
  if (text == "hourly") return "0 * * * *";
  if (text == "daily") return "0 0 * * *";
  if (text == "weekly") return "0 0 * * 1";  // systemd's: Monday 00:00
  if (text == "monthly") return "0 0 1 * *";
  return {};
}

}  // namespace

Result<Schedule> Schedule::Parse(std::string_view text) {
  Schedule s;
  s.text_ = std::string(text);
  std::string_view spec = Shorthand(text);
  if (spec.empty()) spec = text;
  std::vector<std::string_view> words;
  for (std::string_view w : Split(spec, ' ')) {
    if (!w.empty()) words.push_back(w);
  }
  if (words.empty()) return InvalidArgumentError("empty schedule");
  bool unused = false;
  if (words.size() == 5 && words[0].find(':') == std::string_view::npos) {
    const FieldSyntax cron{"-"};
    CAIRN_RETURN_IF_ERROR(FieldParser(text, "minute", 0, 59, cron).Parse(words[0], &s.minute_, &unused));
    CAIRN_RETURN_IF_ERROR(FieldParser(text, "hour", 0, 23, cron).Parse(words[1], &s.hour_, &unused));
    CAIRN_RETURN_IF_ERROR(
        FieldParser(text, "day of month", 1, 31, cron).Parse(words[2], &s.mday_, &s.mday_any_));
    CAIRN_RETURN_IF_ERROR(FieldParser(text, "month", 1, 12, cron).Parse(words[3], &s.month_, &unused));
    CAIRN_RETURN_IF_ERROR(FieldParser(text, "day of week", 0, 7, FieldSyntax{"-", true})
                              .Parse(words[4], &s.wday_, &s.wday_any_));
    return s;
  }
  // systemd: [WEEKDAYS] [*-*-*] HH:MM[:SS]
  const FieldSyntax sd{".."};
  size_t i = 0;
  s.wday_.set();
  if (words.size() > 1 && words[0].find(':') == std::string_view::npos &&
      words[0].find('-') == std::string_view::npos) {
    s.wday_.reset();
    CAIRN_RETURN_IF_ERROR(FieldParser(text, "weekday", 0, 6, FieldSyntax{"..", true})
                              .Parse(words[0], &s.wday_, &s.wday_any_));
    ++i;
  }
  if (i < words.size() && words[i] == "*-*-*") ++i;
  if (i + 1 != words.size()) {
    return InvalidArgumentError(fmt::format(
        "schedule \"{}\": not a schedule: expected cron's \"MIN HOUR DOM MONTH DOW\", systemd's "
        "\"[WEEKDAYS] HH:MM\", or minutely, hourly, daily, weekly, monthly",
        text));
  }
  std::vector<std::string_view> hms = Split(words[i], ':');
  if (hms.size() < 2 || hms.size() > 3) {
    return InvalidArgumentError(fmt::format("schedule \"{}\": expected HH:MM or HH:MM:SS", text));
  }
  if (hms.size() == 3 && hms[2] != "0" && hms[2] != "00") {
    return InvalidArgumentError(
        fmt::format("schedule \"{}\": seconds other than 00 are not supported", text));
  }
  CAIRN_RETURN_IF_ERROR(FieldParser(text, "hour", 0, 23, sd).Parse(hms[0], &s.hour_, &unused));
  CAIRN_RETURN_IF_ERROR(FieldParser(text, "minute", 0, 59, sd).Parse(hms[1], &s.minute_, &unused));
  s.mday_.set();
  s.month_.set();
  return s;
}

bool Schedule::DayMatches(int mday, int wday) const {
  // cron: with both fields restricted, either one matching is enough.
  if (!mday_any_ && !wday_any_) return mday_[mday] || wday_[wday];
  return mday_[mday] && wday_[wday];
}

int64_t Schedule::Next(int64_t after) const {
  time_t t = static_cast<time_t>(after - (after % 60 + 60) % 60 + 60);
  const time_t limit = t + int64_t{5} * 366 * 86400;
  while (t < limit) {
    struct tm tm {};
    localtime_r(&t, &tm);
    if (!month_[tm.tm_mon + 1]) {
      tm.tm_mon += 1;
      tm.tm_mday = 1;
      tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    } else if (!DayMatches(tm.tm_mday, tm.tm_wday)) {
      tm.tm_mday += 1;
      tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    } else if (!hour_[tm.tm_hour]) {
      tm.tm_hour += 1;
      tm.tm_min = tm.tm_sec = 0;
    } else if (!minute_[tm.tm_min]) {
      tm.tm_min += 1;
      tm.tm_sec = 0;
    } else {
      return t;
    }
    tm.tm_isdst = -1;
    time_t next = mktime(&tm);
    // A clock change can map the new time back onto this one: step on.
    t = next > t ? next : t + 60;
  }
  return 0;
}

}  // namespace cairn::server
