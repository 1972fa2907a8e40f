#include "verify/verify_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/bytes.h"
#include "datastore/snapshot_ref.h"

namespace cairn::verify {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

size_t CountIncomplete(const VerifyReport& r) {
  return std::count_if(r.snapshots.begin(), r.snapshots.end(),
                       [](const auto& s) { return s.ok && !s.complete; });
}

// " bytes A..B, C..D, and N more" (the first four ranges), or "".
std::string RangesText(const std::vector<std::pair<uint64_t, uint32_t>>& ranges) {
  std::string where;
  size_t shown = 0;
  for (const auto& [off, len] : ranges) {
    if (++shown > 4) {
      where += fmt::format(", and {} more", ranges.size() - 4);
      break;
    }
    where += fmt::format("{}{}..{}", where.empty() ? " bytes " : ", ", off, off + len);
  }
  return where;
}

}  // namespace

double VerifyEtaSeconds(const VerifyReport& r) {
  const double speed = r.seconds > 0 ? static_cast<double>(r.raw_bytes) / r.seconds : 0;
  return r.left_bytes == 0 ? 0 : speed > 0 ? static_cast<double>(r.left_bytes) / speed : -1;
}

VerifyText DescribeVerify(const VerifyReport& r, double outdated_after_days) {
  VerifyText t;
  for (const auto& p : r.problems) {
    t.problems.push_back(fmt::format("BAD {}: {}", p.what, p.error));
    for (size_t i = 0; i < p.affected.size(); ++i) {
      t.problems.push_back(fmt::format("    needed by {}{}", p.affected[i],
                                       i < p.ranges.size() ? RangesText(p.ranges[i]) : ""));
    }
  }
  const size_t incomplete = CountIncomplete(r);
  if (r.resumed_from > 0) {
    t.notes.push_back(fmt::format("resumed the run started {}: {} chunks ({}) already done",
                                  datastore::FormatRfc3339(r.resumed_from), r.resumed_chunks,
                                  HumanBytes(r.resumed_bytes)));
  }
  if (r.fresh_chunks > 0) {
    t.notes.push_back(fmt::format("skipped {} chunks ({}) found ok within {} days (ledger)",
                                  r.fresh_chunks, HumanBytes(r.fresh_bytes),
                                  outdated_after_days));
  }
  if (r.left_chunks > 0) {
    const double eta = VerifyEtaSeconds(r);
    t.notes.push_back(fmt::format(
        "left {} chunks ({}) for the next run (stalest first); the rest takes about {} at this "
        "speed; {} snapshots not judged yet",
        r.left_chunks, HumanBytes(r.left_bytes),
        eta < 0 ? std::string("?") : fmt::format("{:.0f} s", eta), incomplete));
  }
  const size_t failed =
      std::count_if(r.snapshots.begin(), r.snapshots.end(), [](const auto& s) { return !s.ok; });
  t.result = fmt::format("{} snapshots: {}", r.snapshots.size(),
                         r.ok() ? (incomplete ? "no damage found so far" : "all ok")
                                : fmt::format("{} snapshots FAILED", failed));
  t.summary = fmt::format(
      "verified {:.2f}/{:.2f} MiB in {:.2f} s, speed {:.2f}/{:.2f} MiB/s ({} errors)",
      r.stored_bytes / kMiB, r.raw_bytes / kMiB, r.seconds,
      r.seconds > 0 ? r.stored_bytes / kMiB / r.seconds : 0,
      r.seconds > 0 ? r.raw_bytes / kMiB / r.seconds : 0, r.problems.size());
  return t;
}

nlohmann::json VerifyReportJson(const VerifyReport& r) {
  nlohmann::json snapshots = nlohmann::json::array();
  for (const auto& s : r.snapshots) {
    snapshots.push_back({{"snapshot", s.snapshot.ToString()},
                         {"ns", s.snapshot.group.ns},
                         {"state", !s.ok ? "failed" : s.complete ? "ok" : "incomplete"},
                         {"content_checked", s.content_checked},
                         {"chunks", s.chunks}});
  }
  nlohmann::json problems = nlohmann::json::array();
  for (const auto& p : r.problems) {
    nlohmann::json dependents = nlohmann::json::array();
    for (size_t i = 0; i < p.affected.size(); ++i) {
      nlohmann::json ranges = nlohmann::json::array();
      if (i < p.ranges.size()) {
        for (const auto& [off, len] : p.ranges[i]) {
          ranges.push_back({{"offset", off}, {"length", len}});
        }
      }
      dependents.push_back({{"archive", p.affected[i]}, {"ranges", ranges}});
    }
    problems.push_back({{"what", p.what},
                        {"error", p.error},
                        {"missing", p.missing},
                        {"affected", p.affected},
                        {"dependents", dependents}});
  }
  const bool keyless = std::any_of(r.snapshots.begin(), r.snapshots.end(),
                                   [](const auto& s) { return !s.content_checked; });
  return {{"ok", r.ok()},
          {"snapshots", snapshots},
          {"problems", problems},
          {"errors", r.problems.size()},
          {"unique_chunks", r.unique_chunks},
          {"selected_bytes", r.selected_bytes},
          {"checked_chunks", r.checked_chunks},
          {"keyless_chunks", r.keyless_chunks},
          {"content_checked", !keyless},
          {"stored_bytes", r.stored_bytes},
          {"raw_bytes", r.raw_bytes},
          {"skipped", {{"fresh_chunks", r.fresh_chunks},
                       {"fresh_bytes", r.fresh_bytes},
                       {"resumed_chunks", r.resumed_chunks},
                       {"resumed_bytes", r.resumed_bytes}}},
          {"left", {{"chunks", r.left_chunks},
                    {"bytes", r.left_bytes},
                    {"eta_seconds", VerifyEtaSeconds(r)}}},
          {"resumed_from", r.resumed_from},
          {"ledger_warning", r.ledger_warning},
          {"oldest_check", r.oldest_check},
          {"order", ChunkOrderName(r.order)},
          {"seconds", r.seconds},
          {"mib_per_s", r.seconds > 0 ? r.raw_bytes / kMiB / r.seconds : 0.0},
          {"jobs", {{"final", r.jobs_final}, {"max", r.jobs_max}, {"mean", r.jobs_mean}}}};
}

}  // namespace cairn::verify
