// Image restore: write the chunks of a fixed index to a target.
//
// The planner turns the index into work: every distinct non-zero id once,
// with every offset that uses it, and the zero ranges apart (their id is
// known, so they are never fetched). The executor runs the plan through the
// fetch pipeline (pipeline/fetch_pipeline.h): many reads in flight against
// the ChunkSource, tuned by the concurrency controller; on all cores each
// chunk is checked (CRC, decompress, SHA-256 against the id, length) and
// pwritten at each of its offsets, in whatever order chunks complete.
//
// Targets:
//   new file   created as TARGET.partial, truncated to the image size (zero
//              chunks stay holes), fsynced, renamed to TARGET on success,
//              removed on failure: a failed restore never leaves TARGET;
//   existing   only with overwrite: a regular file is resized to the image
//              size, a block device must be at least as large; zero chunks
//              are written as zeros;
//   "-"        standard output, in order (zero chunks written as zeros):
//              the image is fetched in windows that fit the memory budget
//              and each window is written out in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "index/fixed_index.h"
#include "store/chunk_source.h"

namespace cairn::restore {

struct PlanItem {
  crypto::Digest id;
  uint32_t length = 0;            // plaintext bytes of the chunk
  std::vector<uint64_t> offsets;  // every image offset that holds it
};

struct RestorePlan {
  std::vector<PlanItem> items;  // distinct non-zero ids, in first-use order
  std::vector<std::pair<uint64_t, uint32_t>> zero_ranges;  // (offset, length)
};

RestorePlan PlanImageRestore(const index::FixedIndex& idx);

struct ImageRestoreOptions {
  bool overwrite = false;  // allow writing over an existing file or device
  int jobs = 0;            // reads in flight: 0 = adaptive (auto), N = pinned
  int cpu_workers = 0;     // 0: one per core
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
};

struct ImageRestoreStats {
  uint64_t bytes = 0;           // image bytes restored
  uint64_t chunks_fetched = 0;  // distinct ids read from the source
  uint64_t stored_bytes = 0;    // stored (encoded) bytes read
  uint64_t zero_chunks = 0;
  uint64_t written_bytes = 0;   // bytes written to the target (zeros included)
  int jobs_final = 0;           // reads in flight at the end
  int jobs_max = 0;             // most reads in flight allowed
  double jobs_mean = 0;         // time-weighted mean of the limit
  uint64_t peak_bytes_in_flight = 0;
};

// Restores `idx` from `source` to `target` (a path or "-").
Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats);

}  // namespace cairn::restore
