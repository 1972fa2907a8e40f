// Image restore: write the chunks of one or more fixed indexes to targets.
//
// The planner turns the indexes into work: every distinct non-zero id once,
// with every (target, offset) that uses it, and the zero ranges apart (their
// id is known, so they are never fetched). Several images restored together
// (restore --all) share one plan, so a chunk two disks hold is fetched once,
// and one pipeline, so they share one read limit and one memory budget.
// The executor runs the plan through the fetch pipeline
// (pipeline/fetch_pipeline.h): many reads in flight against the
// ChunkSource, tuned by the concurrency controller; on all cores each chunk
// is checked (CRC, decompress, SHA-256 against the id, length) and pwritten
// at each of its offsets, in whatever order chunks complete.
//
// Targets:
//   new file   created as TARGET.partial, truncated to the image size (zero
//              chunks stay holes), fsynced, renamed to TARGET on success,
//              removed on failure: a failed restore never leaves TARGET;
//   existing   only with overwrite or in_place: a regular file is resized
//              to the image size, a block device must be at least as large;
//              zero chunks are written as zeros;
//   in place   an existing target is first read and hashed on all cores
//              (the scan); only the chunks that differ are fetched and
//              written, so restoring onto yesterday's copy moves only what
//              changed;
//   "-"        standard output, in order (zero chunks written as zeros):
//              the image is fetched in windows that fit the memory budget
//              and each window is written out in order (one target only);
//   rehearse   the full pipeline (fetch, decode, check) with nothing
//              written: what a real restore would achieve, with no target.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/env.h"
#include "index/fixed_index.h"
#include "pipeline/progress.h"
#include "store/chunk_source.h"

namespace cairn::restore {

struct Use {
  uint32_t target = 0;  // index into the targets of the restore
  uint64_t offset = 0;  // image offset
};

struct PlanItem {
  crypto::Digest id;
  uint32_t length = 0;    // plaintext bytes of the chunk
  std::vector<Use> uses;  // every place that holds it, in index order
};

struct ZeroRange {
  uint32_t target = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
};

struct RestorePlan {
  std::vector<PlanItem> items;  // distinct non-zero ids, in first-use order
  std::vector<ZeroRange> zero_ranges;
};

// Plans restoring `indexes[t]` to target t. With `wanted`, only the chunk
// positions p with (*wanted)[t][p] set are planned (in-place restore).
RestorePlan PlanImageRestore(std::span<const index::FixedIndex* const> indexes,
                             const std::vector<std::vector<uint8_t>>* wanted = nullptr,
                             const crypto::CryptConfig* crypt = nullptr);
// One image.
RestorePlan PlanImageRestore(const index::FixedIndex& idx,
                             const crypto::CryptConfig* crypt = nullptr);

// Lets an NBD export use a target while it is being restored (`restore
// --instant`, access/instant_device.h). RestoreImages tells the gate where
// each target is once it is open, then hands it every write (chunks, and
// zeros on an existing target) instead of writing itself: the gate calls
// `write` (the restore's own pwrite) or skips a region the export has
// written meanwhile, and is done with it when it returns.
//
// Thread safety: Write is called concurrently from the CPU workers.
class RestoreGate {
 public:
  virtual ~RestoreGate() = default;
  // Target `target` is open at `path` (TARGET.partial for a new file,
  // sized and all holes: `fresh`).
  virtual Status Opened(uint32_t target, const std::string& path, bool fresh) = 0;
  virtual Status Write(uint32_t target, uint64_t offset, ByteSpan data,
                       const std::function<Status()>& write) = 0;
};

struct ImageRestoreOptions {
  bool overwrite = false;  // allow writing over an existing file or device
  bool in_place = false;   // scan an existing target, rewrite only what differs
  bool rehearse = false;   // fetch, decode and check; write nothing
  int jobs = 0;            // reads in flight: 0 = adaptive (auto), N = pinned
  int cpu_workers = 0;     // 0: one per core
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  pipeline::Progress* progress = nullptr;  // optional
  // The key of an encrypted snapshot (Datastore::CryptFor); null: plain.
  const crypto::CryptConfig* crypt = nullptr;
  // restore --instant: writes go through it (not with rehearse or stdout).
  RestoreGate* gate = nullptr;
};

// Every image byte is counted once in fetched, dedup, zero or in_place.
struct ImageRestoreStats {
  uint64_t bytes = 0;           // image bytes restored
  uint64_t fetched_bytes = 0;   // plaintext bytes of the chunks fetched
  uint64_t chunks_fetched = 0;  // distinct ids read from the source
  uint64_t stored_bytes = 0;    // stored (encoded) bytes read
  uint64_t dedup_bytes = 0;     // served by a chunk fetched for another offset
  uint64_t zero_bytes = 0;      // zero chunks: never fetched
  uint64_t zero_chunks = 0;
  uint64_t in_place_bytes = 0;  // already right in the target: not touched
  uint64_t written_bytes = 0;   // bytes written to the target (zeros included)
  uint64_t scanned_bytes = 0;   // target bytes read and hashed (in place)
  double seconds = 0;           // from the start until this target was done
  // The pipeline's, shared by all targets of one restore.
  int jobs_final = 0;  // reads in flight at the end
  int jobs_max = 0;    // most reads in flight allowed
  double jobs_mean = 0;  // time-weighted mean of the limit
  uint64_t peak_bytes_in_flight = 0;
};

struct ImageTarget {
  const index::FixedIndex* index = nullptr;
  std::string path;  // file, device, or "-" (alone); unused when rehearsing
};

// Restores every target through one plan and one pipeline; `stats` gets one
// entry per target. On error no target is reported restored: new files are
// removed, and existing ones hold a mix (say so to the user).
Status RestoreImages(Env& env, std::span<const ImageTarget> targets, store::ChunkSource& source,
                     const ImageRestoreOptions& options, std::vector<ImageRestoreStats>* stats);

// Restores `idx` from `source` to `target` (a path or "-").
Status RestoreImage(Env& env, const index::FixedIndex& idx, store::ChunkSource& source,
                    const std::string& target, const ImageRestoreOptions& options,
                    ImageRestoreStats* stats);

}  // namespace cairn::restore
