// Verify coverage: what share of a datastore's chunks the ledger
// (verify/ledger.h) has found ok within the last N days, for a few N at
// once. The metrics of `cairn serve` export it
// (cairn_store_verify_coverage_ratio, docs/SERVER.md) so an alert can see a
// rolling verify fall behind its promise before a snapshot goes unchecked.
//
// One listing of the chunk store (names only, no stat) merged with the
// ledger's sorted entries: a chunk counts for window N when its newest
// ledger record is ok and at most N days old. Chunks that are gone (gc) but
// still in the ledger count for nothing; set-aside and quarantined files
// are not chunks here.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "datastore/datastore.h"

namespace cairn::verify {

struct VerifyCoverage {
  uint64_t chunks = 0;  // chunk files listed
  // For each window asked (days, same order): chunks found ok within it.
  std::vector<int> days;
  std::vector<uint64_t> checked;
};

// `now_unix`: the time windows end at. Opening the ledger creates
// DATASTORE/.ledger/ when absent (as any verify would).
Result<VerifyCoverage> ReadVerifyCoverage(const datastore::Datastore& store, int64_t now_unix,
                                          const std::vector<int>& days);

}  // namespace cairn::verify
