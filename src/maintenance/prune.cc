#include "maintenance/prune.h"

#include <time.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

namespace cairn::maintenance {
namespace {

using datastore::Datastore;
using datastore::GroupRef;
using datastore::SnapshotRef;

// How a rule marked a snapshot while the rules run (PBS PruneMark, plus
// "not marked yet").
enum class Mark { kNone, kKeep, kRemove, kProtected };

// "[ns] vm/100/TIME", or just the name in the root namespace.
std::string DisplayName(const SnapshotRef& snap) {
  return snap.group.ns.empty() ? snap.ToString()
                               : fmt::format("[{}] {}", snap.group.ns, snap.ToString());
}

// The command a user types to reach `snap` (for hints in messages).
std::string CommandArgs(const SnapshotRef& snap) {
  return snap.group.ns.empty() ? snap.ToString()
                               : fmt::format("--ns {} {}", snap.group.ns, snap.ToString());
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, UTF-16 surrogates and values past U+10FFFF are not UTF-8.
    static constexpr uint32_t kMinForLen[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Removes `dir` and the files in it, tolerating files that vanish meanwhile
// (a prune removing an unfinished directory may meet a forget that is
// halfway through the same directory) and retrying when a file appears
// after the listing (a verify writing verify.json.blob just then). Unlike
// datastore::RemoveSnapshotDir, a directory that is already gone is fine.
Status RemoveDirTolerant(Env& env, const std::string& dir) {
  for (int attempt = 0;; ++attempt) {
    auto names = env.ListDir(dir);
    if (!names.ok()) {
      return names.status().code() == StatusCode::kNotFound ? Status::Ok() : names.status();
    }
    for (const auto& name : *names) {
      Status s = env.RemoveFile(JoinPath(dir, name));
      if (!s.ok() && s.code() != StatusCode::kNotFound) return s;
    }
    Status s = env.RemoveDir(dir);
    if (s.ok() || s.code() == StatusCode::kNotFound) return Status::Ok();
    // AlreadyExists is ENOTEMPTY: something was written after ListDir.
    if (s.code() != StatusCode::kAlreadyExists || attempt >= 3) return s;
  }
}

std::string SnapshotFile(const Datastore& store, const SnapshotRef& snap, const char* name) {
  return JoinPath(store.SnapshotDir(snap), name);
}

}  // namespace

// --- rules -------------------------------------------------------------------

std::string_view KeepReasonName(KeepReason reason) {
  switch (reason) {
    case KeepReason::kRemove: return "remove";
    case KeepReason::kLast: return "last";
    case KeepReason::kHourly: return "hourly";
    case KeepReason::kDaily: return "daily";
    case KeepReason::kWeekly: return "weekly";
    case KeepReason::kMonthly: return "monthly";
    case KeepReason::kYearly: return "yearly";
    case KeepReason::kProtected: return "protected";
    case KeepReason::kAll: return "all";
  }
  return "?";
}

std::string PeriodKey(KeepReason rule, int64_t unix_seconds, bool utc) {
  const char* format = nullptr;
  switch (rule) {
    case KeepReason::kHourly: format = "%Y/%m/%d/%H"; break;
    case KeepReason::kDaily: format = "%Y/%m/%d"; break;
    case KeepReason::kWeekly: format = "%G/%V"; break;  // ISO 8601 week-based year and week
    case KeepReason::kMonthly: format = "%Y/%m"; break;
    case KeepReason::kYearly: format = "%Y"; break;
    default: return std::to_string(unix_seconds);  // kLast: every snapshot is its own period
  }
  std::tm tm{};
  const time_t t = static_cast<time_t>(unix_seconds);
  if (utc) {
    gmtime_r(&t, &tm);
  } else {
    localtime_r(&t, &tm);
  }
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

std::vector<PruneDecision> ComputePrune(std::span<const PruneCandidate> snapshots,
                                        const KeepOptions& options) {
  std::vector<PruneDecision> list;
  list.reserve(snapshots.size());
  for (const auto& c : snapshots) list.push_back({c.time, c.is_protected, KeepReason::kRemove});
  std::sort(list.begin(), list.end(),
            [](const PruneDecision& a, const PruneDecision& b) { return a.time > b.time; });
  if (!options.KeepsSomething()) {
    // PBS keeps everything when no option is given; the CLI refuses earlier.
    for (auto& d : list) d.reason = d.is_protected ? KeepReason::kProtected : KeepReason::kAll;
    return list;
  }
  // localtime_r need not read TZ itself (POSIX); tzset makes it.
  if (!options.utc) tzset();

  std::vector<Mark> mark(list.size(), Mark::kNone);
  const std::pair<KeepReason, uint32_t> rules[] = {
      {KeepReason::kLast, options.last},       {KeepReason::kHourly, options.hourly},
      {KeepReason::kDaily, options.daily},     {KeepReason::kWeekly, options.weekly},
      {KeepReason::kMonthly, options.monthly}, {KeepReason::kYearly, options.yearly},
  };
  for (const auto& [rule, keep] : rules) {
    if (keep == 0) continue;
    // Periods an earlier rule already keeps a snapshot of: this rule leaves
    // them alone, so "keep-daily 7" after "keep-last 3" means seven more days.
    std::set<std::string> already_included;
    for (size_t i = 0; i < list.size(); ++i) {
      if (mark[i] == Mark::kKeep) {
        already_included.insert(PeriodKey(rule, list[i].time, options.utc));
      }
    }
    std::set<std::string> included;
    for (size_t i = 0; i < list.size(); ++i) {
      if (mark[i] != Mark::kNone) continue;
      if (list[i].is_protected) {
        mark[i] = Mark::kProtected;  // never uses up one of the `keep` periods
        continue;
      }
      std::string key = PeriodKey(rule, list[i].time, options.utc);
      if (already_included.contains(key)) continue;
      if (!included.contains(key)) {
        if (included.size() >= keep) break;
        included.insert(std::move(key));
        mark[i] = Mark::kKeep;
        list[i].reason = rule;
      } else {
        mark[i] = Mark::kRemove;  // an older snapshot of a period this rule keeps
      }
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_protected) {
      list[i].reason = KeepReason::kProtected;
    } else if (mark[i] != Mark::kKeep) {
      list[i].reason = KeepReason::kRemove;
    }
  }
  return list;
}

// --- snapshot administration ---------------------------------------------------

Result<bool> IsProtected(const Datastore& store, const SnapshotRef& snap) {
  auto info = store.env().Stat(SnapshotFile(store, snap, kProtectedFileName));
  if (info.ok()) return true;
  if (info.status().code() == StatusCode::kNotFound) return false;
  return info.status();
}

Status SetProtected(const Datastore& store, const SnapshotRef& snap, bool on) {
  Env& env = store.env();
  // The shared lock orders this against a forget: either the forget sees
  // the flag (it checks under its exclusive lock) or the snapshot is gone.
  CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotShared(snap));
  const std::string dir = store.SnapshotDir(snap);
  const std::string path = JoinPath(dir, kProtectedFileName);
  if (on) {
    if (env.Stat(path).ok()) return Status::Ok();
    CAIRN_ASSIGN_OR_RETURN(auto f, env.OpenWritable(path, OpenMode::kTruncate));
    CAIRN_RETURN_IF_ERROR(f->Close());
  } else {
    Status s = env.RemoveFile(path);
    if (s.code() == StatusCode::kNotFound) return Status::Ok();
    CAIRN_RETURN_IF_ERROR(s);
  }
  // The flag is a directory entry: the directory's fsync makes it durable.
  return env.SyncDir(dir);
}

Result<std::string> ReadNotes(const Datastore& store, const SnapshotRef& snap) {
  const std::string path = SnapshotFile(store, snap, kNotesFileName);
  auto data = ReadWholeFile(store.env(), path, kMaxNotesBytes);
  if (!data.ok()) {
    if (data.status().code() == StatusCode::kNotFound) return std::string();
    return data.status();
  }
  return std::string(AsStringView(*data));
}

Status WriteNotes(const Datastore& store, const SnapshotRef& snap, std::string_view text) {
  if (text.size() > kMaxNotesBytes) {
    return InvalidArgumentError(fmt::format("notes of {}: {} bytes, at most {} are allowed",
                                            DisplayName(snap), text.size(), kMaxNotesBytes));
  }
  if (!IsValidUtf8(text)) {
    return InvalidArgumentError(
        fmt::format("notes of {}: the text is not valid UTF-8", DisplayName(snap)));
  }
  Env& env = store.env();
  CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotShared(snap));
  const std::string dir = store.SnapshotDir(snap);
  const std::string path = JoinPath(dir, kNotesFileName);
  if (text.empty()) {
    Status s = env.RemoveFile(path);
    if (s.code() == StatusCode::kNotFound) return Status::Ok();
    CAIRN_RETURN_IF_ERROR(s);
    return env.SyncDir(dir);
  }
  return WriteFileAtomic(env, path, AsBytes(text));
}

Status ForgetSnapshot(const Datastore& store, const SnapshotRef& snap) {
  Env& env = store.env();
  CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotExclusive(snap));
  const std::string dir = store.SnapshotDir(snap);
  const std::string manifest = JoinPath(dir, index::kManifestFileName);
  // We may have opened the manifest just before another forget unlinked it
  // and locked it just after that forget let go: then it is gone.
  if (!env.Stat(manifest).ok()) {
    return NotFoundError(
        fmt::format("snapshot {} not found in datastore {}", DisplayName(snap), store.path()));
  }
  CAIRN_ASSIGN_OR_RETURN(bool is_protected, IsProtected(store, snap));
  if (is_protected) {
    return FailedPreconditionError(fmt::format(
        "snapshot {} is protected; to forget it, first run: cairn unprotect -r {} {}",
        DisplayName(snap), store.path(), CommandArgs(snap)));
  }
  // The manifest goes first: from that moment on the snapshot does not exist
  // for readers, whatever happens to the rest. A crash afterwards leaves a
  // directory without manifest, which the next prune removes.
  CAIRN_RETURN_IF_ERROR(env.RemoveFile(manifest));
  CAIRN_RETURN_IF_ERROR(env.SyncDir(dir));
  CAIRN_RETURN_IF_ERROR(RemoveDirTolerant(env, dir).WithContext(
      fmt::format("removing the files of forgotten snapshot {}", DisplayName(snap))));
  return env.SyncDir(store.GroupDir(snap.group));
}

// --- prune over groups ---------------------------------------------------------

std::string_view PruneOutcomeName(PruneOutcome outcome) {
  switch (outcome) {
    case PruneOutcome::kKept: return "keep";
    case PruneOutcome::kRemoved: return "remove";
    case PruneOutcome::kWouldRemove: return "would remove";
    case PruneOutcome::kInUse: return "in use";
    case PruneOutcome::kFailed: return "failed";
  }
  return "?";
}

namespace {

// Removes (or, in a dry run, lists) the TIME/ directories of `group` that
// have no manifest. Only under the group lock: a running backup holds it for
// its whole run, and its directory has no manifest until it commits.
Status PruneUnfinished(const Datastore& store, const GroupRef& group, bool dry_run,
                       GroupPruneReport* out) {
  Env& env = store.env();
  const std::string group_dir = store.GroupDir(group);
  auto list_unfinished = [&]() -> Result<std::vector<std::string>> {
    auto names = env.ListDir(group_dir);
    if (!names.ok()) {
      if (names.status().code() == StatusCode::kNotFound) return std::vector<std::string>{};
      return names.status();
    }
    std::vector<std::string> unfinished;
    for (const auto& name : *names) {
      if (!datastore::ParseRfc3339(name).ok()) continue;  // .lock and the like
      const std::string dir = JoinPath(group_dir, name);
      auto info = env.Stat(dir);
      if (!info.ok() || !info->is_dir) continue;
      if (env.Stat(JoinPath(dir, index::kManifestFileName)).ok()) continue;
      unfinished.push_back(name);
    }
    std::sort(unfinished.rbegin(), unfinished.rend());  // newest first, like snapshots
    return unfinished;
  };
  // A cheap look first, so a group without leftovers never takes its lock
  // (and never makes a backup starting just then report a conflict).
  CAIRN_ASSIGN_OR_RETURN(auto candidates, list_unfinished());
  if (candidates.empty()) return Status::Ok();
  auto lock = store.LockGroup(group);
  if (!lock.ok()) {
    if (lock.status().code() != StatusCode::kAborted) return lock.status();
    for (const auto& name : candidates) {
      out->unfinished.push_back(
          {name, PruneOutcome::kInUse, "a backup of the group is running; left alone"});
    }
    return Status::Ok();
  }
  // Listed again under the lock: a directory seen above may have been a
  // backup that has committed meanwhile.
  CAIRN_ASSIGN_OR_RETURN(auto names, list_unfinished());
  for (const auto& name : names) {
    UnfinishedDir u{name, dry_run ? PruneOutcome::kWouldRemove : PruneOutcome::kRemoved, ""};
    if (!dry_run) {
      Status s = RemoveDirTolerant(env, JoinPath(group_dir, name));
      if (!s.ok()) {
        u.outcome = PruneOutcome::kFailed;
        u.detail = std::string(s.message());
      }
    }
    out->unfinished.push_back(std::move(u));
  }
  if (!dry_run && !names.empty()) CAIRN_RETURN_IF_ERROR(env.SyncDir(group_dir));
  return Status::Ok();
}

Result<GroupPruneReport> PruneGroup(const Datastore& store, const GroupRef& group,
                                    const PruneOptions& options) {
  GroupPruneReport out;
  out.group = group;
  CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(group));
  std::vector<PruneCandidate> candidates;
  std::map<int64_t, SnapshotRef> by_time;
  for (const auto& s : snaps) {
    CAIRN_ASSIGN_OR_RETURN(bool is_protected, IsProtected(store, s));
    candidates.push_back({s.time, is_protected});
    by_time.emplace(s.time, s);
  }
  for (const auto& d : ComputePrune(candidates, options.keep)) {
    PrunedSnapshot p{by_time.at(d.time), d.is_protected, d.reason, PruneOutcome::kKept, ""};
    if (!d.keep()) {
      if (options.dry_run) {
        p.outcome = PruneOutcome::kWouldRemove;
      } else {
        Status s = ForgetSnapshot(store, p.snap);
        switch (s.code()) {
          case StatusCode::kOk: p.outcome = PruneOutcome::kRemoved; break;
          case StatusCode::kNotFound:  // forgotten by someone else meanwhile
            p.outcome = PruneOutcome::kRemoved;
            p.detail = "already gone";
            break;
          case StatusCode::kFailedPrecondition:  // protected meanwhile
            p.is_protected = true;
            p.reason = KeepReason::kProtected;
            break;
          case StatusCode::kAborted:  // locked by a restore or a backup
            p.outcome = PruneOutcome::kInUse;
            p.detail = std::string(s.message());
            break;
          default:
            p.outcome = PruneOutcome::kFailed;
            p.detail = std::string(s.message());
        }
      }
    }
    out.snapshots.push_back(std::move(p));
  }
  CAIRN_RETURN_IF_ERROR(PruneUnfinished(store, group, options.dry_run, &out));
  return out;
}

}  // namespace

Result<PruneReport> Prune(const Datastore& store, const std::string& ns,
                          const std::optional<GroupRef>& group, const PruneOptions& options) {
  if (!options.keep.KeepsSomething()) {
    return InvalidArgumentError("no --keep-* option given; nothing would be removed");
  }
  std::vector<GroupRef> groups;
  if (group) {
    if (!store.env().Stat(store.GroupDir(*group)).ok()) {
      const std::string name = group->ns.empty()
                                   ? group->ToString()
                                   : fmt::format("[{}] {}", group->ns, group->ToString());
      return NotFoundError(
          fmt::format("group {} not found in datastore {}", name, store.path()));
    }
    groups.push_back(*group);
  } else {
    CAIRN_ASSIGN_OR_RETURN(groups, store.ListGroups(ns));
  }
  PruneReport report;
  for (const auto& g : groups) {
    CAIRN_ASSIGN_OR_RETURN(auto r, PruneGroup(store, g, options));
    for (const auto& s : r.snapshots) {
      switch (s.outcome) {
        case PruneOutcome::kKept: ++report.kept; break;
        case PruneOutcome::kRemoved:
        case PruneOutcome::kWouldRemove: ++report.removed; break;
        case PruneOutcome::kInUse: ++report.in_use; break;
        case PruneOutcome::kFailed: ++report.failed; break;
      }
    }
    for (const auto& u : r.unfinished) {
      if (u.outcome == PruneOutcome::kRemoved || u.outcome == PruneOutcome::kWouldRemove) {
        ++report.unfinished_removed;
      } else if (u.outcome == PruneOutcome::kFailed) {
        ++report.unfinished_failed;
      }
    }
    report.groups.push_back(std::move(r));
  }
  return report;
}

std::string_view PruneActionName(PruneOutcome outcome) {
  switch (outcome) {
    case PruneOutcome::kKept: return "keep";
    case PruneOutcome::kRemoved:
    case PruneOutcome::kWouldRemove: return "remove";
    case PruneOutcome::kInUse: return "in-use";
    case PruneOutcome::kFailed: return "failed";
  }
  return "?";
}

nlohmann::json PruneReportJson(const PruneReport& r, const std::string& ns, bool dry_run) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupPruneReport& g : r.groups) {
    nlohmann::json snaps = nlohmann::json::array();
    for (const PrunedSnapshot& s : g.snapshots) {
      snaps.push_back({{"snapshot", s.snap.ToString()},
                       {"time", s.snap.TimeString()},
                       {"action", PruneActionName(s.outcome)},
                       {"reason", KeepReasonName(s.reason)},
                       {"protected", s.is_protected},
                       {"detail", s.detail}});
    }
    nlohmann::json unfinished = nlohmann::json::array();
    for (const UnfinishedDir& u : g.unfinished) {
      unfinished.push_back(
          {{"name", u.name}, {"action", PruneActionName(u.outcome)}, {"detail", u.detail}});
    }
    groups.push_back({{"group", g.group.ToString()},
                      {"ns", g.group.ns},
                      {"snapshots", std::move(snaps)},
                      {"unfinished", std::move(unfinished)}});
  }
  return {{"dry_run", dry_run},
          {"ns", ns},
          {"kept", r.kept},
          {"removed", r.removed},
          {"in_use", r.in_use},
          {"failed", r.failed},
          {"unfinished_removed", r.unfinished_removed},
          {"groups", std::move(groups)}};
}

}  // namespace cairn::maintenance
