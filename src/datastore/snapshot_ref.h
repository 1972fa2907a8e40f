// Names of groups and snapshots: TYPE/ID and TYPE/ID/TIME, optionally in a
// namespace (NS = "a/b", at most 8 levels). TYPE is vm, ct or host; ID is
// [A-Za-z0-9][A-Za-z0-9._-]* up to 128 bytes; TIME is RFC 3339 UTC to the
// second ("2026-11-30T05:00:00Z").
//
// On disk (relative to the datastore root): [ns/A/ns/B/]TYPE/ID/TIME/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace cairn::datastore {

struct GroupRef {
  std::string ns;  // "" = root namespace
  std::string type;
  std::string id;

  std::string ToString() const { return type + "/" + id; }  // "vm/100"
  std::string RelDir() const;  // "ns/a/vm/100"
  bool operator==(const GroupRef&) const = default;
};

struct SnapshotRef {
  GroupRef group;
  int64_t time = 0;  // Unix seconds, UTC

  std::string TimeString() const;  // RFC 3339
  std::string ToString() const;    // "vm/100/2026-11-30T05:00:00Z"
  std::string RelDir() const;      // "ns/a/vm/100/2026-11-30T05:00:00Z"
  bool operator==(const SnapshotRef&) const = default;
};

// "2026-11-30T05:00:00Z" ⇄ Unix seconds. InvalidArgument on any other form.
std::string FormatRfc3339(int64_t unix_seconds);
Result<int64_t> ParseRfc3339(std::string_view text);

Status ValidateNamespace(std::string_view ns);
// "vm/100" in namespace `ns`.
Result<GroupRef> ParseGroup(std::string_view ns, std::string_view text);

// A parsed "TYPE/ID/TIME" or "TYPE/ID/latest" (latest == true, time unset).
struct SnapshotSpec {
  GroupRef group;
  bool latest = false;
  int64_t time = 0;
};
Result<SnapshotSpec> ParseSnapshotSpec(std::string_view ns, std::string_view text);

}  // namespace cairn::datastore
