// The words and JSON of a verify report: the same from `cairn verify` (a
// local run, or one through a server) and in the server's task log (verify
// --on-server), as prune, gc and status share theirs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "verify/verify.h"

namespace cairn::verify {

// At this run's speed, the seconds the rest of the selection takes
// (0: nothing left; negative: unknown, nothing was read).
double VerifyEtaSeconds(const VerifyReport& r);

// The report's lines, in the order they are printed.
struct VerifyText {
  // "BAD chunk 3f2a…: …", then "    needed by ARCHIVE bytes A..B, …" for each
  // archive that needs it.
  std::vector<std::string> problems;
  // Resumed, skipped (ledger) and left chunks, when there are any.
  std::vector<std::string> notes;
  std::string result;   // "3 snapshots: all ok"
  std::string summary;  // "verified 1.00/2.00 MiB in 0.50 s, speed …"
};

// `outdated_after_days`: the --outdated-after of the run (named in the
// "skipped" note).
VerifyText DescribeVerify(const VerifyReport& r, double outdated_after_days);

// The report as JSON: outcome, snapshots, problems (with the ranges of
// each dependent archive), chunk and byte counts, skipped and left work,
// chunk order, reads in flight. Callers add what only they know (the
// bottleneck, connections, where results were recorded, coverage).
nlohmann::json VerifyReportJson(const VerifyReport& r);

}  // namespace cairn::verify
