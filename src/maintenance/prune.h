// Retention: which snapshots of a group to keep, and the snapshot
// administration it rests on (forget, protect, notes).
//
// Prune rules (ComputePrune, pure, PBS semantics). The snapshots of ONE group
// are sorted newest first and the rules run in the order last, hourly, daily,
// weekly, monthly, yearly. Each rule with a count N > 0 has a period key
// (last: the snapshot itself; hourly "%Y/%m/%d/%H"; daily "%Y/%m/%d"; weekly
// the ISO week "%G/%V"; monthly "%Y/%m"; yearly "%Y") and:
//   1. collects the keys of the snapshots earlier rules already keep;
//   2. walks newest → oldest over snapshots no rule has marked yet:
//      - a protected snapshot is marked protected and skipped (it never uses
//        up one of the N periods);
//      - a key an earlier rule already covers is skipped (left unmarked);
//      - a new key: once N keys are taken the rule stops, else the key is
//        taken and the snapshot kept (the newest of its period);
//      - a key this rule already took: the snapshot is marked remove.
// Afterwards every unmarked snapshot is removed unless protected. So only
// periods that hold a backup count, and each rule keeps the newest snapshot
// of a period among those no earlier rule kept. Periods are in the local
// time zone (like PBS) unless KeepOptions::utc. With no rule at all,
// everything is kept.
//
// On disk (in the snapshot directory, docs/FORMAT.md):
//   .protected   empty file: the snapshot is never pruned or forgotten
//   notes.txt    free UTF-8 text, at most kMaxNotesBytes
//
// Forget removes the manifest first (the snapshot vanishes atomically for
// readers), then the other files and the directory. It never touches chunks:
// `cairn gc` frees the space. It takes the snapshot's exclusive lock, so a
// snapshot a restore reads or a running backup uses as its dedup base is
// left alone (Unavailable); prune keeps such a snapshot this time.
//
// Thread safety: the functions are safe to call concurrently, from several
// processes too; the snapshot and group locks order what must be ordered.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "datastore/datastore.h"

namespace cairn::maintenance {

// --- prune rules (pure) ----------------------------------------------------

struct KeepOptions {
  // How many periods of each kind to keep; 0 = the rule is not used.
  uint32_t last = 0;
  uint32_t hourly = 0;
  uint32_t daily = 0;
  uint32_t weekly = 0;
  uint32_t monthly = 0;
  uint32_t yearly = 0;
  // Periods in UTC instead of the process's local time zone (TZ).
  bool utc = false;

  bool KeepsSomething() const {
    return last + hourly + daily + weekly + monthly + yearly > 0;
  }
};

// Why a snapshot is kept, or kRemove. The rules are listed in the order they
// are applied.
enum class KeepReason {
  kRemove,
  kLast,
  kHourly,
  kDaily,
  kWeekly,
  kMonthly,
  kYearly,
  kProtected,
  kAll,  // no rule was given: everything stays
};

// "remove", "last", "hourly", "daily", "weekly", "monthly", "yearly",
// "protected", "all" (no rule given).
std::string_view KeepReasonName(KeepReason reason);

// The period `unix_seconds` falls in for `rule` (kLast … kYearly), e.g.
// "2026/53" for a weekly rule. Exposed for tests.
std::string PeriodKey(KeepReason rule, int64_t unix_seconds, bool utc);

struct PruneCandidate {
  int64_t time = 0;  // Unix seconds; unique within the group
  bool is_protected = false;
};

struct PruneDecision {
  int64_t time = 0;
  bool is_protected = false;
  KeepReason reason = KeepReason::kRemove;

  bool keep() const { return reason != KeepReason::kRemove; }
};

// The decision for each snapshot of one group, newest first (`snapshots`
// may come in any order).
std::vector<PruneDecision> ComputePrune(std::span<const PruneCandidate> snapshots,
                                        const KeepOptions& options);

// --- snapshot administration -----------------------------------------------

using datastore::kNotesFileName;      // datastore/datastore.h
using datastore::kProtectedFileName;
inline constexpr size_t kMaxNotesBytes = 64 << 10;

// Whether the snapshot carries `.protected`. Does not check that it exists.
Result<bool> IsProtected(const datastore::Datastore& store, const datastore::SnapshotRef& snap);
// Creates (durably: file, then the directory's fsync) or removes
// `.protected`. Holds the snapshot's shared lock meanwhile, so it cannot
// interleave with a forget. NotFound when the snapshot does not exist.
Status SetProtected(const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                    bool on);

// The snapshot's notes; "" when it has none.
Result<std::string> ReadNotes(const datastore::Datastore& store,
                              const datastore::SnapshotRef& snap);
// Replaces the notes atomically; empty `text` removes them. InvalidArgument
// when `text` is not UTF-8 or longer than kMaxNotesBytes; NotFound when the
// snapshot does not exist.
Status WriteNotes(const datastore::Datastore& store, const datastore::SnapshotRef& snap,
                  std::string_view text);

// Removes a finished snapshot (see the overview for the order). NotFound when
// it does not exist; FailedPrecondition when it is protected; Unavailable
// while it is in use. Chunks are left to garbage collection.
Status ForgetSnapshot(const datastore::Datastore& store, const datastore::SnapshotRef& snap);

// --- prune over groups -----------------------------------------------------

struct PruneOptions {
  KeepOptions keep;
  bool dry_run = false;  // decide and report, remove nothing
};

enum class PruneOutcome {
  kKept,         // a rule or the protection keeps it
  kRemoved,      // forgotten (an unfinished directory: removed)
  kWouldRemove,  // dry run: would be removed
  kInUse,        // to be removed but in use (or, for unfinished directories,
                 // a backup of the group is running): kept this time
  kFailed,       // removing failed; `detail` says why
};
std::string_view PruneOutcomeName(PruneOutcome outcome);  // "keep", "remove", …

struct PrunedSnapshot {
  datastore::SnapshotRef snap;
  bool is_protected = false;
  KeepReason reason = KeepReason::kRemove;
  PruneOutcome outcome = PruneOutcome::kKept;
  std::string detail;  // why it was in use or failed
};

// A TIME/ directory without a manifest, left by a killed backup.
struct UnfinishedDir {
  std::string name;  // the TIME directory name
  PruneOutcome outcome = PruneOutcome::kRemoved;
  std::string detail;
};

struct GroupPruneReport {
  datastore::GroupRef group;
  std::vector<PrunedSnapshot> snapshots;  // newest first
  std::vector<UnfinishedDir> unfinished;
};

struct PruneReport {
  std::vector<GroupPruneReport> groups;
  // Totals over every group's finished snapshots, by outcome.
  size_t kept = 0;
  size_t removed = 0;  // kRemoved or, in a dry run, kWouldRemove
  size_t in_use = 0;
  size_t failed = 0;
  // Unfinished directories removed (would be, in a dry run) and failures.
  size_t unfinished_removed = 0;
  size_t unfinished_failed = 0;
};

// Applies `options` to `group`, or to every group of namespace `ns` when
// `group` is nullopt. Each removal goes through ForgetSnapshot; a snapshot in
// use is kept and reported, a failed removal is reported and the rest goes
// on. Unfinished directories are removed only while the group's lock is free
// (no backup running). InvalidArgument when no keep rule is given.
Result<PruneReport> Prune(const datastore::Datastore& store, const std::string& ns,
                          const std::optional<datastore::GroupRef>& group,
                          const PruneOptions& options);

// What a line of `cairn prune` says a snapshot gets: "keep", "remove" (in a
// dry run: what would happen), "in-use", "failed".
std::string_view PruneActionName(PruneOutcome outcome);

// The report as `cairn prune --json` prints it: {"dry_run", "ns", "kept",
// "removed", "in_use", "failed", "unfinished_removed", "groups": [{"group",
// "ns", "snapshots": [{"snapshot", "time", "action", "reason", "protected",
// "detail"}], "unfinished": [{"name", "action", "detail"}]}]}. The server's
// POST …/prune answers the same document, so a prune through a server prints
// exactly what a local one does.
nlohmann::json PruneReportJson(const PruneReport& report, const std::string& ns, bool dry_run);

}  // namespace cairn::maintenance
