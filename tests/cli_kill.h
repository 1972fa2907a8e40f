// The kill harness of the crash tests (cli_kill_test.cc,
// cli_server_kill_test.cc): run cairn under cairn-killpoint
// (tests/killpoint.cc), which SIGKILLs it just before its Nth file write,
// sync, rename, unlink or create (or socket write), and pick the Ns from a
// seed. A kill point is a count of system calls, not a time, so it does
// not depend on the machine's speed: a test first runs the operation once
// to count its events, then kills copies of the same starting state at
// seeded points spread over [1, count].
//
// Reproduce a failure: the test prints "seed S, point N of T"; run it with
// CAIRN_KILL_SEED=S (and CAIRN_KILL_POINTS as it ran). More points (the long
// form): CAIRN_KILL_POINTS=50.
//
// Thread safety: none; one test, one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace cairn::cli_test {

// What cairn-killpoint wrote at the end of a run.
struct KillReport {
  uint64_t events = 0;  // events counted (up to the kill, when killed)
  bool killed = false;  // killed here, before event `events`
  std::string last;     // that event ("rename /…/x.tmp-1-0"), or the last one
};

// Path of cairn-killpoint (built beside the tests).
const char* KillpointBinary();
// "" when cairn-killpoint works on this machine, else why not (no ptrace
// or seccomp: a reason to skip).
std::string KillpointUnavailableReason();

// RunOptions that run cairn under cairn-killpoint, SIGKILLed before event
// `at` (0: never) of `events` ("file", "net" or "file,net"); the report
// goes to `report_path`.
RunOptions KillAt(uint64_t at, const std::string& report_path, const std::string& events = "file",
                  RunOptions base = {});
// Parses a report; a test failure and zeros when it is missing.
KillReport ReadKillReport(const std::string& path);

// `n` kill points in [1, total], one drawn in each of n equal strata (early
// to late), sorted; the same (total, n, seed) gives the same points.
std::vector<uint64_t> KillPoints(uint64_t total, int n, uint64_t seed);
// Points per writer: CAIRN_KILL_POINTS when set, else `ci_default` (fewer
// under sanitizers: at least 1).
int KillPointCount(int ci_default);
// CAIRN_KILL_SEED when set, else `fallback`.
uint64_t KillSeed(uint64_t fallback);
// The fewest of `tried` kills that must land inside the run (before it
// finished) for a crash test to have tested anything: `share` of them,
// rounded up, at least 1. One of 24 is not enough: a writer that got faster
// than the estimate, or a kill point past its last event, would leave the
// test checking clean runs only.
int MinimumKills(int tried, double share = 0.5);

// "" when the trees under `a` and `b` hold the same names, types, file
// contents and symlink targets, else the first difference.
std::string CompareTrees(const std::string& a, const std::string& b);
// cp -a SRC DST (times kept: gc's grace looks at them); DST must not exist.
void CopyTree(const std::string& src, const std::string& dst);
void RemoveTree(const std::string& path);

}  // namespace cairn::cli_test
