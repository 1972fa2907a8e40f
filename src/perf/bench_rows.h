// The parts of `cairn benchmark` (machine_bench.h) shared by the files that
// measure its rows: machine_bench.cc (the CPU rows, the report) and
// store_bench.cc (the rows of a datastore).
#pragma once

#include <cstdint>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "crypto/sha256.h"
#include "perf/machine_bench.h"

namespace cairn::perf {

// Seconds of `env`'s monotonic clock since `start_nanos`.
double Seconds(Env& env, int64_t start_nanos);

// Measures `make` on one thread and on `threads` into `row` (at most
// `max_bytes` each, 0: no cap), appends it to `rows` and reports it
// through options.on_row.
Status MeasureRow(const MachineBenchOptions& options, int threads, BenchRow row,
                  const WorkFactory& make, uint64_t max_bytes, std::vector<BenchRow>* rows);

// DataLoss naming `id` unless a decoded chunk's length is the one its
// index gives.
Status CheckLength(size_t got, size_t want, const crypto::Digest& id);

// The rows of options.store (non-null): chunk_insert into a scratch store
// inside the datastore (removed before returning, on errors too),
// chunk_read of the newest snapshots' chunks with the full check, and
// restore_rehearsal of the newest image archive.
Status MeasureDatastoreRows(Env& env, const MachineBenchOptions& options, int threads,
                            const BenchData& data, std::vector<BenchRow>* rows);

}  // namespace cairn::perf
