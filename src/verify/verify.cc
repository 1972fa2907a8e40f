#include "verify/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/io_error.h"
#include "store/local_chunk_store.h"
#include "verify/ledger.h"
#include "verify/verify_detail.h"

namespace cairn::verify {
namespace {

using detail::AddProblem;
using detail::ArchiveCrypt;
using detail::CheckChunks;
using detail::ChunkUse;
using detail::CollectSnapshot;
using detail::Collected;
using detail::Outcomes;
using detail::ReadManifestOf;
using detail::ResolveOrder;
using detail::SortByInode;

// True when the snapshot was forgotten (its manifest goes first).
bool ManifestGone(const datastore::Datastore& store, const datastore::SnapshotRef& snap) {
  return store.env()
             .Stat(JoinPath(store.SnapshotDir(snap), index::kManifestFileName))
             .status()
             .code() == StatusCode::kNotFound;
}

// The interrupted run of the same scope this one continues, if any:
// DATASTORE/.ledger/job.json names the scope and when that run started.
struct Job {
  std::string path;
  int64_t resumed_from = 0;  // unix start of the run being resumed; 0: a fresh run
  // This job's checks are recorded at this time or later. A fresh job's
  // "started" is one second past the run's start, so the checks of an
  // earlier run in the same second never pass for the job's own.
  int64_t stamp = 0;
};

Job StartJob(Env& env, const std::string& ledger_dir, const std::string& scope, int64_t now,
             Logger& logger) {
  Job job{JoinPath(ledger_dir, "job.json"), 0};
  auto data = ReadWholeFile(env, job.path, 1 << 20);
  if (data.ok()) {
    auto j = nlohmann::json::parse(AsStringView(*data), nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("scope", std::string("\x01")) == scope &&
        j.value("started", int64_t{0}) > 0) {
      job.resumed_from = j.value("started", int64_t{0});
      job.stamp = job.resumed_from;
      return job;
    }
  }
  job.stamp = now + 1;
  nlohmann::json j = {{"scope", scope}, {"started", job.stamp}};
  Status s = WriteFileAtomic(env, job.path, AsBytes(j.dump()));
  if (!s.ok())
    logger.Warn("could not record the verify job (an interrupted run restarts): {}", s.ToString());
  return job;
}

// Merges one archive's sorted offsets into (offset, length) ranges.
std::vector<std::pair<uint64_t, uint32_t>> Ranges(std::vector<uint64_t> offsets, uint32_t length) {
  std::sort(offsets.begin(), offsets.end());
  std::vector<std::pair<uint64_t, uint32_t>> out;
  for (uint64_t off : offsets) {
    if (!out.empty() && out.back().first + out.back().second == off &&
        out.back().second <= UINT32_MAX - length) {
      out.back().second += length;
    } else {
      out.emplace_back(off, length);
    }
  }
  return out;
}

constexpr int64_t kDay = 86400;

// The even pace of a coverage promise (VerifyReport::pace_bytes). A chunk
// last found ok `age` seconds ago is due by daily run k = floor(days + 1 -
// age / day), clamped to 1..days (1 = this run, and so for a chunk never
// found ok): checked then, its check is at most `days` old. Bucket 1 is
// exactly the due set of RunVerify (age above days - 1).
uint64_t PaceBytes(const std::vector<ChunkUse>& uses, const std::vector<uint32_t>& unique,
                   const std::vector<uint32_t>& last_ok, int64_t now, int days) {
  std::vector<uint64_t> by_run(static_cast<size_t>(days) + 1, 0);
  for (size_t u = 0; u < unique.size(); ++u) {
    int64_t k = 1;
    if (last_ok[u] > 0) {
      const int64_t left = (days + 1) * kDay - (now - int64_t{last_ok[u]});
      k = std::clamp<int64_t>(left >= 0 ? left / kDay : 1, 1, days);
    }
    by_run[static_cast<size_t>(k)] += uses[unique[u]].length;
  }
  uint64_t due = 0, pace = 0;
  for (int k = 1; k <= days; ++k) {
    due += by_run[static_cast<size_t>(k)];
    pace = std::max(pace, (due + static_cast<uint64_t>(k) - 1) / static_cast<uint64_t>(k));
  }
  return pace;
}

// Cuts `todo` (stalest first, its `due` chunks ahead) to the slice: the
// due chunks, then more while within the budget's share of the selection,
// or, with a promise and no limit of the caller's, until the even pace.
// A max_duration slice is cut by time instead (CheckChunks).
void CutSlice(const std::vector<ChunkUse>& uses, const std::vector<uint32_t>& unique, size_t due,
              const VerifyOptions& options, std::vector<uint32_t>* todo, VerifyReport* report) {
  auto length = [&](size_t k) -> uint64_t { return uses[unique[(*todo)[k]]].length; };
  uint64_t taken = report->due_bytes;
  size_t keep = due;
  if (options.budget > 0 && options.budget < 1) {
    const auto allowed =
        static_cast<uint64_t>(options.budget * static_cast<double>(report->selected_bytes));
    if (taken > allowed) report->due_over_limit = true;
    while (keep < todo->size() && (keep == 0 || taken + length(keep) <= allowed)) {
      taken += length(keep++);
    }
  } else if (options.cover_days > 0 && options.max_duration_ns == 0) {
    while (keep < todo->size() && taken < report->pace_bytes) taken += length(keep++);
  } else {
    return;
  }
  todo->resize(keep);
}

// Two uses of one distinct chunk: the same id at the same length. Keyed
// by (id, length): an index that uses one id at two lengths is damaged,
// and only checking each length catches it.
bool SameChunk(const ChunkUse& a, const ChunkUse& b) {
  return a.id == b.id && a.length == b.length;
}

// What one run reads: every chunk reference of the selection, each
// distinct chunk once, and which of them this run checks.
struct VerifyPlan {
  Collected c;
  std::vector<uint32_t> unique;  // first use of each distinct chunk
  // Per distinct chunk: the unix time of its last ok check (0: none), and
  // whether this run skips it (ok in the ledger: fresh, or done by the run
  // being resumed; never when due).
  std::vector<uint32_t> last_ok;
  std::vector<uint8_t> skipped;
  std::vector<uint32_t> todo;  // indexes into `unique`, in reading order
  size_t due = 0;              // todo's first `due` are due (a coverage promise)
  std::unique_ptr<Ledger> ledger;
  Job job;
};

// Reads every manifest, then every index of the selection into c->uses
// (sized exactly once).
Status CollectUses(const datastore::Datastore& store, VerifyReport* report, Collected* c) {
  std::vector<std::optional<index::Manifest>> manifests;
  uint64_t expected = 0;
  for (size_t i = 0; i < report->snapshots.size(); ++i) {
    manifests.push_back(ReadManifestOf(store, i, report));
    if (!manifests.back()) continue;
    for (const auto& e : manifests.back()->archives) {
      if (e.kind == index::ArchiveKind::kImage && e.chunk_size > 0) {
        expected += index::FixedIndex::ChunkCount(e.size, e.chunk_size);
      }
    }
  }
  if (expected >= UINT32_MAX) {
    return ResourceExhaustedError(fmt::format(
        "{} chunk references are more than one verify run handles; verify groups one by one",
        expected));
  }
  c->uses.reserve(expected);
  for (size_t i = 0; i < report->snapshots.size(); ++i) {
    if (manifests[i]) CollectSnapshot(store, i, *manifests[i], report, c);
    manifests[i].reset();
  }
  if (c->uses.size() >= UINT32_MAX) {
    return ResourceExhaustedError("too many chunk references for one verify run");
  }
  return Status::Ok();
}

// Sorts the uses by id (each distinct chunk once, and a local store's files
// in directory order) and returns the first use of each distinct chunk.
std::vector<uint32_t> DistinctChunks(std::vector<ChunkUse>& uses, VerifyReport* report) {
  std::sort(uses.begin(), uses.end(), [](const ChunkUse& a, const ChunkUse& b) {
    return a.id != b.id ? a.id < b.id : a.length < b.length;
  });
  std::vector<uint32_t> unique;
  size_t n = 0;  // counted first: sized exactly, no slack from growth
  for (size_t i = 0; i < uses.size(); ++i) n += i == 0 || !SameChunk(uses[i], uses[i - 1]);
  unique.reserve(n);
  for (size_t i = 0; i < uses.size(); ++i) {
    if (i == 0 || !SameChunk(uses[i], uses[i - 1])) unique.push_back(static_cast<uint32_t>(i));
  }
  report->unique_chunks = unique.size();
  for (uint32_t u : unique) report->selected_bytes += uses[u].length;
  return unique;
}

// Opens the ledger and the job it resumes, when the run uses one.
void OpenLedger(const datastore::Datastore& store, const VerifyOptions& options,
                int64_t start_unix, VerifyPlan* plan, VerifyReport* report) {
  if (!options.use_ledger) return;
  auto opened = Ledger::Open(store.env(), store.path(), &report->ledger_warning);
  if (!opened.ok()) {
    options.logger->Warn("verify ledger unavailable, checking everything: {}",
                         opened.status().ToString());
    return;
  }
  plan->ledger = std::move(*opened);
  plan->job = StartJob(store.env(), JoinPath(store.path(), ".ledger"), options.scope, start_unix,
                       *options.logger);
  report->resumed_from = plan->job.resumed_from;
}

// What the ledger already knows: fills last_ok, skipped and todo (the
// chunks to read, stalest first when the run is a slice or a promise, the
// due ones ahead), then cuts todo to the slice.
void SelectChunks(const VerifyOptions& options, int64_t start_unix, VerifyPlan* plan,
                  VerifyReport* report) {
  const std::vector<ChunkUse>& uses = plan->c.uses;
  const size_t n = plan->unique.size();
  const int64_t fresh_since =
      options.outdated_after_s > 0 ? start_unix - options.outdated_after_s : INT64_MAX;
  // The coverage promise: a chunk not found ok since this (or never) is due.
  const int64_t due_before =
      options.cover_days > 0 ? start_unix - (options.cover_days - 1) * kDay : 0;
  plan->last_ok.assign(n, 0);
  plan->skipped.assign(n, 0);
  plan->todo.reserve(n);
  for (size_t u = 0; u < n; ++u) {
    const ChunkUse& use = uses[plan->unique[u]];
    const LedgerEntry* e = plan->ledger ? plan->ledger->Find(use.id) : nullptr;
    if (e != nullptr && e->verdict == ChunkVerdict::kOk) {
      plan->last_ok[u] = static_cast<uint32_t>(std::clamp<int64_t>(e->time, 1, UINT32_MAX));
      const bool due = plan->last_ok[u] < due_before;
      if (!due && plan->job.resumed_from > 0 && e->time >= plan->job.resumed_from) {
        ++report->resumed_chunks;
        report->resumed_bytes += use.length;
        plan->skipped[u] = 1;
        continue;
      }
      if (!due && e->time >= fresh_since) {
        ++report->fresh_chunks;
        report->fresh_bytes += use.length;
        plan->skipped[u] = 1;
        continue;
      }
    }
    plan->todo.push_back(static_cast<uint32_t>(u));
  }
  if (plan->ledger) plan->ledger->ReleaseEntries();  // merged: from here on it only appends
  // A slice, and a promise, take the stalest first (never checked, then
  // oldest check): the due chunks come first.
  const bool slice = options.max_duration_ns > 0 || (options.budget > 0 && options.budget < 1) ||
                     options.cover_days > 0;
  const std::vector<uint32_t>& last_ok = plan->last_ok;
  if (slice) {
    std::stable_sort(plan->todo.begin(), plan->todo.end(),
                     [&](uint32_t a, uint32_t b) { return last_ok[a] < last_ok[b]; });
  }
  if (options.cover_days > 0) {
    size_t& due = plan->due;
    while (due < plan->todo.size() && int64_t{last_ok[plan->todo[due]]} < due_before) {
      report->due_bytes += uses[plan->unique[plan->todo[due]]].length;
      ++due;
    }
    report->due_chunks = due;
    report->pace_bytes = PaceBytes(uses, plan->unique, last_ok, start_unix, options.cover_days);
  }
  CutSlice(uses, plan->unique, plan->due, options, &plan->todo, report);
}

Status PlanVerify(const datastore::Datastore& store, const VerifyOptions& options,
                  int64_t start_unix, VerifyPlan* plan, VerifyReport* report) {
  CAIRN_RETURN_IF_ERROR(CollectUses(store, report, &plan->c));
  plan->unique = DistinctChunks(plan->c.uses, report);
  OpenLedger(store, options, start_unix, plan, report);
  SelectChunks(options, start_unix, plan, report);
  return Status::Ok();
}

// Reads and checks the plan's chunks; the ones it leaves out (cut by the
// budget) and the ones a deadline stops before are not reached.
// The plan's todo is reordered stretch by stretch as it is read.
Status ExecuteVerify(const datastore::Datastore& store, const VerifyOptions& options,
                     VerifyPlan* plan, Outcomes* outcomes, VerifyReport* report) {
  std::vector<uint8_t> in_todo(plan->unique.size(), 0);
  for (uint32_t u : plan->todo) in_todo[u] = 1;
  for (size_t u = 0; u < plan->unique.size(); ++u) {
    if (!in_todo[u] && !plan->skipped[u]) outcomes->SetNotReached(u);
  }
  store::ChunkSource& source = options.source ? *options.source : store.source();
  report->order = ResolveOrder(store, options);
  const store::LocalChunkStore* by_inode =
      report->order == ChunkOrder::kInode ? &store.chunks() : nullptr;
  return CheckChunks(store.env(), source, by_inode, plan->c.uses, plan->c.archive_crypt,
                     plan->unique, plan->todo, plan->due, options, plan->job.stamp,
                     plan->ledger.get(), outcomes, report);
}

// Chunks left, the oldest check and the coverage of the promise.
void TallyChunks(const VerifyOptions& options, int64_t start_unix, const Outcomes& outcomes,
                 VerifyPlan* plan, VerifyReport* report) {
  for (size_t u = 0; u < plan->unique.size(); ++u) {
    uint32_t& last_ok = plan->last_ok[u];
    if (outcomes.state(u) == Outcomes::kNotReached) {
      ++report->left_chunks;
      report->left_bytes += plan->c.uses[plan->unique[u]].length;
    } else if (outcomes.state(u) == Outcomes::kOk && !plan->skipped[u]) {
      last_ok = static_cast<uint32_t>(std::max(start_unix, plan->job.stamp));
    }
    if (last_ok > 0 && (report->oldest_check == 0 || last_ok < report->oldest_check)) {
      report->oldest_check = last_ok;
    }
    if (options.cover_days > 0) {
      report->never_checked_chunks += last_ok == 0;
      report->covered_chunks +=
          last_ok > 0 && int64_t{last_ok} >= start_unix - options.cover_days * kDay;
    }
  }
}

// One failed chunk, used by c.uses[first, end): its snapshots fail (unless
// all of them were forgotten meanwhile), it is quarantined when asked, and
// a problem names it with the ranges of every archive that uses it.
void ReportFailedChunk(const datastore::Datastore& store, const VerifyOptions& options,
                       const Collected& c, size_t first, size_t end, Status s,
                       VerifyReport* report) {
  std::map<uint32_t, std::vector<uint64_t>> by_archive;  // archive → offsets
  for (size_t k = first; k < end; ++k) {
    by_archive[c.uses[k].archive].push_back(c.Offset(c.uses[k]));
  }
  std::map<std::string, std::vector<std::pair<uint64_t, uint32_t>>> ranges;
  std::vector<size_t> snaps;
  for (auto& [archive, offsets] : by_archive) {
    auto& r = ranges[c.archives[archive]];
    auto merged = Ranges(std::move(offsets), c.uses[first].length);
    r.insert(r.end(), merged.begin(), merged.end());
    snaps.push_back(c.archive_snapshot[archive]);
  }
  std::sort(snaps.begin(), snaps.end());
  snaps.erase(std::unique(snaps.begin(), snaps.end()), snaps.end());
  // Missing because every snapshot that needed it was forgotten during the
  // run and gc has removed it since: not damage.
  if (s.code() == StatusCode::kNotFound &&
      std::all_of(snaps.begin(), snaps.end(), [&](size_t snap) {
        return ManifestGone(store, report->snapshots[snap].snapshot);
      })) {
    for (size_t snap : snaps) report->snapshots[snap].vanished = true;
    return;
  }
  for (size_t snap : snaps) {
    report->snapshots[snap].ok = false;
    ++report->snapshots[snap].errors;
  }
  const crypto::Digest& id = c.uses[first].id;
  if (IsIoError(s)) {
    // Not proof of damage: the stored bytes may be intact (the disk may
    // read them on a retry, or after a repair), and a rename is one more
    // write to a failing disk. The chunk stays where it is, its snapshots
    // fail this run and the next verify reads it again; a backup of the
    // same data writes a good copy over it (LocalChunkStore::Insert).
    s = Status(s.code(), fmt::format("{} (an I/O error: left in place, not quarantined)",
                                     s.message()));
  } else if (s.code() == StatusCode::kDataLoss && options.quarantine &&
             options.source == nullptr) {
    auto moved = store.QuarantineChunk(id);
    if (moved.ok()) {
      s = Status(s.code(), fmt::format("{}; quarantined as {}", s.message(), *moved));
    } else {
      options.logger->Warn("could not quarantine chunk {}: {}", crypto::DigestHex(id),
                           moved.status().ToString());
    }
  }
  std::vector<std::string> affected;
  std::vector<std::vector<std::pair<uint64_t, uint32_t>>> where;
  for (auto& [label, r] : ranges) {
    affected.push_back(label);
    where.push_back(std::move(r));
  }
  AddProblem(report, "chunk " + crypto::DigestHex(id), s, std::move(affected));
  report->problems.back().ranges = std::move(where);
}

// Judges the snapshots by their chunks: one not reached leaves its
// snapshots unjudged, a failed one fails them.
void ReportFailures(const datastore::Datastore& store, const VerifyOptions& options,
                    const VerifyPlan& plan, const Outcomes& outcomes, VerifyReport* report) {
  const Collected& c = plan.c;
  for (size_t i = 0, u = 0; i < c.uses.size(); ++u) {
    size_t j = i;
    while (j < c.uses.size() && SameChunk(c.uses[j], c.uses[i])) ++j;
    if (outcomes.state(u) == Outcomes::kNotReached) {
      for (size_t k = i; k < j; ++k) {
        report->snapshots[c.archive_snapshot[c.uses[k].archive]].complete = false;
      }
    } else if (outcomes.state(u) == Outcomes::kFailed) {
      ReportFailedChunk(store, options, c, i, j, outcomes.error(u), report);
    }
    i = j;
  }
}

// Snapshots removed (pruned) while this run went on are not its business,
// nor are problems that only concern them (an index removed while read).
void DropVanished(const datastore::Datastore& store, VerifyReport* report) {
  for (SnapshotResult& r : report->snapshots) {
    if (!r.vanished && ManifestGone(store, r.snapshot)) r.vanished = true;
  }
  std::erase_if(report->problems, [&](const Problem& p) {
    return !p.affected.empty() &&
           std::all_of(p.affected.begin(), p.affected.end(), [&](const std::string& label) {
             return std::any_of(
                 report->snapshots.begin(), report->snapshots.end(),
                 [&](const SnapshotResult& r) {
                   return r.vanished && label.starts_with(r.snapshot.ToString() + " ");
                 });
           });
  });
  std::erase_if(report->snapshots, [](const SnapshotResult& r) { return r.vanished; });
}

// Each judged snapshot's verify state (the next backup's base rule reads it).
void RecordStates(const datastore::Datastore& store, const VerifyOptions& options,
                  int64_t start_unix, const VerifyReport& report) {
  for (const auto& r : report.snapshots) {
    if (r.ok && !r.complete) continue;  // not judged yet: keep its last state
    datastore::VerifyState state{
        r.ok ? datastore::VerifyOutcome::kOk : datastore::VerifyOutcome::kFailed, start_unix,
        r.errors};
    Status s = store.WriteVerifyState(r.snapshot, state);
    if (!s.ok() &&
        store.env().Stat(store.SnapshotDir(r.snapshot)).status().code() == StatusCode::kNotFound) {
      continue;  // removed just now
    }
    if (!s.ok()) {
      options.logger->Warn("could not record verify state of {}: {}", r.snapshot.ToString(),
                           s.ToString());
    }
  }
}

// Done with this scope: the next run starts afresh (the job goes).
// Otherwise the job stays, and the next run of the scope resumes it. The
// journal is compacted at the end of a scope, after a warning, or when big.
void FinishLedger(Env& env, const VerifyOptions& options, const VerifyPlan& plan,
                  const VerifyReport& report) {
  if (report.left_chunks == 0) env.RemoveFile(plan.job.path).IgnoreError();
  auto journal = plan.ledger->JournalBytes();
  if (report.left_chunks == 0 || !report.ledger_warning.empty() ||
      (journal.ok() && *journal > (uint64_t{64} << 20))) {
    Status s = plan.ledger->Compact();
    if (!s.ok()) options.logger->Warn("could not compact the verify ledger: {}", s.ToString());
  }
}

}  // namespace

Result<std::vector<datastore::SnapshotRef>> SelectSnapshots(const datastore::Datastore& store,
                                                            const std::string& ns,
                                                            const std::string& text) {
  CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ns));
  if (text.empty()) {
    if (ns.empty()) return std::vector<datastore::SnapshotRef>{};  // the whole datastore
    CAIRN_ASSIGN_OR_RETURN(auto all, store.ListAllSnapshots());
    std::erase_if(all, [&](const auto& s) { return s.group.ns != ns; });
    if (all.empty()) return NotFoundError(fmt::format("namespace {} has no snapshots", ns));
    return all;
  }
  if (std::count(text.begin(), text.end(), '/') == 1) {
    CAIRN_ASSIGN_OR_RETURN(auto group, datastore::ParseGroup(ns, text));
    CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(group));
    if (snaps.empty()) return NotFoundError(fmt::format("group {} has no snapshots", text));
    return snaps;
  }
  CAIRN_ASSIGN_OR_RETURN(auto spec, datastore::ParseSnapshotSpec(ns, text));
  CAIRN_ASSIGN_OR_RETURN(auto snap, store.Resolve(spec));
  return std::vector<datastore::SnapshotRef>{snap};
}

Result<VerifyReport> RunVerify(const datastore::Datastore& store, const VerifyOptions& options) {
  if (options.cover_days < 0 || options.cover_days > 36500) {
    return InvalidArgumentError(
        fmt::format("cover days {}: expected 1 to 36500 (0: no promise)", options.cover_days));
  }
  Env& env = store.env();
  const int64_t start_ns = env.NowMonotonicNanos();
  const int64_t start_unix = env.NowUnixSeconds();
  VerifyReport report;
  std::vector<datastore::SnapshotRef> snaps = options.snapshots;
  if (snaps.empty()) {
    CAIRN_ASSIGN_OR_RETURN(snaps, store.ListAllSnapshots());
  }
  for (const auto& s : snaps) report.snapshots.push_back(SnapshotResult{s});

  // Plan: what to read. Execute: read and check it. Report: judge the
  // snapshots, record their states, and keep the ledger.
  VerifyPlan plan;
  CAIRN_RETURN_IF_ERROR(PlanVerify(store, options, start_unix, &plan, &report));
  Outcomes outcomes(plan.unique.size());
  CAIRN_RETURN_IF_ERROR(ExecuteVerify(store, options, &plan, &outcomes, &report));
  TallyChunks(options, start_unix, outcomes, &plan, &report);
  ReportFailures(store, options, plan, outcomes, &report);
  DropVanished(store, &report);
  if (options.record_state) RecordStates(store, options, start_unix, report);
  if (plan.ledger) FinishLedger(env, options, plan, report);
  report.seconds = static_cast<double>(env.NowMonotonicNanos() - start_ns) / 1e9;
  return report;
}

}  // namespace cairn::verify

