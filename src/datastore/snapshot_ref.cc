#include "datastore/snapshot_ref.h"

#include <algorithm>
#include <ctime>
#include <vector>

#include <fmt/format.h>

namespace cairn::datastore {
namespace {

bool IsIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty() || name.size() > 128) {
    return InvalidArgumentError(fmt::format("{} '{}' must be 1 to 128 characters", what, name));
  }
  if (name[0] == '.' || name[0] == '-') {
    return InvalidArgumentError(
        fmt::format("{} '{}' must start with a letter or digit", what, name));
  }
  for (char c : name) {
    if (!IsIdChar(c)) {
      return InvalidArgumentError(fmt::format(
          "{} '{}' may contain only letters, digits, '.', '_' and '-'", what, name));
    }
  }
  return Status::Ok();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

}  // namespace

std::string GroupRef::RelDir() const {
  std::string dir;
  if (!ns.empty()) {
    for (std::string_view part : Split(ns, '/')) dir += fmt::format("ns/{}/", part);
  }
  return dir + type + "/" + id;
}

std::string SnapshotRef::TimeString() const { return FormatRfc3339(time); }
std::string SnapshotRef::ToString() const { return group.ToString() + "/" + TimeString(); }
std::string SnapshotRef::RelDir() const { return group.RelDir() + "/" + TimeString(); }

std::string FormatRfc3339(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

Result<int64_t> ParseRfc3339(std::string_view text) {
  auto bad = [&] {
    return InvalidArgumentError(
        fmt::format("time '{}' is not RFC 3339 UTC like 2026-11-30T05:00:00Z", text));
  };
  // YYYY-MM-DDTHH:MM:SSZ
  if (text.size() != 20 || text[4] != '-' || text[7] != '-' || text[10] != 'T' ||
      text[13] != ':' || text[16] != ':' || text[19] != 'Z') {
    return bad();
  }
  auto num = [&](size_t pos, size_t len, int* out) {
    int v = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      v = v * 10 + (text[i] - '0');
    }
    *out = v;
    return true;
  };
  int year, mon, day, hour, min, sec;
  if (!num(0, 4, &year) || !num(5, 2, &mon) || !num(8, 2, &day) || !num(11, 2, &hour) ||
      !num(14, 2, &min) || !num(17, 2, &sec)) {
    return bad();
  }
  if (year < 1970 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 ||
      sec > 59) {
    return bad();
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  int64_t t = timegm(&tm);
  if (FormatRfc3339(t) != text) return bad();  // rejects 2026-02-31 and the like
  return t;
}

Status ValidateNamespace(std::string_view ns) {
  if (ns.empty()) return Status::Ok();
  auto parts = Split(ns, '/');
  if (parts.size() > 7) {
    return InvalidArgumentError(fmt::format("namespace '{}' is deeper than 7 levels", ns));
  }
  for (std::string_view p : parts) CAIRN_RETURN_IF_ERROR(ValidateName("namespace part", p));
  return Status::Ok();
}

Result<GroupRef> ParseGroup(std::string_view ns, std::string_view text) {
  CAIRN_RETURN_IF_ERROR(ValidateNamespace(ns));
  auto parts = Split(text, '/');
  if (parts.size() != 2) {
    return InvalidArgumentError(fmt::format("group '{}' must be TYPE/ID, like vm/100", text));
  }
  if (parts[0] != "vm" && parts[0] != "ct" && parts[0] != "host") {
    return InvalidArgumentError(
        fmt::format("backup type '{}' must be one of vm, ct, host", parts[0]));
  }
  CAIRN_RETURN_IF_ERROR(ValidateName("backup id", parts[1]));
  return GroupRef{std::string(ns), std::string(parts[0]), std::string(parts[1])};
}

Result<SnapshotSpec> ParseSnapshotSpec(std::string_view ns, std::string_view text) {
  size_t slash = text.rfind('/');
  if (slash == std::string_view::npos || std::count(text.begin(), text.end(), '/') != 2) {
    return InvalidArgumentError(fmt::format(
        "snapshot '{}' must be TYPE/ID/TIME or TYPE/ID/latest, like vm/100/latest", text));
  }
  // Errors in a part name the whole spec and its two forms.
  auto in_spec = [&](const Status& s) {
    return s.WithContext(
        fmt::format("snapshot '{}' (TYPE/ID/TIME or TYPE/ID/latest)", text));
  };
  SnapshotSpec spec;
  auto group = ParseGroup(ns, text.substr(0, slash));
  if (!group.ok()) return in_spec(group.status());
  spec.group = std::move(group).value();
  std::string_view time = text.substr(slash + 1);
  if (time == "latest") {
    spec.latest = true;
  } else {
    auto t = ParseRfc3339(time);
    if (!t.ok()) return in_spec(t.status());
    spec.time = *t;
  }
  return spec;
}

}  // namespace cairn::datastore
