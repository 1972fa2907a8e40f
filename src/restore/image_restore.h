// Image restore: write the chunks of a fixed index to a target.
//
// The planner turns the index into work: every distinct non-zero id once,
// with every offset that uses it, and the zero ranges apart (their id is
// known, so they are never fetched). The executor reads each id through a
// ChunkSource, checks it (CRC, decompress, SHA-256 against the id, length)
// and writes it at each of its offsets. Order does not matter for a file or
// a device, so the parallel engine can complete chunks in any order.
//
// Targets:
//   new file   created as TARGET.partial, truncated to the image size (zero
//              chunks stay holes), fsynced, renamed to TARGET on success,
//              removed on failure: a failed restore never leaves TARGET;
//   existing   only with overwrite: a regular file is resized to the image
//              size, a block device must be at least as large; zero chunks
//              are written as zeros;
//   "-"        standard output, in order (zero chunks written as zeros).
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
};

struct ImageRestoreStats {
  uint64_t bytes = 0;           // image bytes restored
  uint64_t chunks_fetched = 0;  // distinct ids read from the source
  uint64_t stored_bytes = 0;    // stored (encoded) bytes read
  uint64_t zero_chunks = 0;
};

// Restores `idx` from `source` to `target` (a path or "-").
Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats);

}  // namespace cairn::restore
