// Image backup: cut a file or block device into fixed-size chunks, hash,
// compress and store the ones the store does not have, and build the fixed
// index.
//
// Shape: the fetch pipeline of restore and verify (pipeline/fetch_pipeline.h)
// run the other way. Its I/O stage keeps positional reads of the source in
// flight, as many as the concurrency controller finds useful (a deep queue
// for an array of disks, one or two for a file in the page cache); CPU
// workers (one per core) run the store-chunk step (backup/chunk_writer.h:
// zero check, id, claim, base lookup, existence check, compress, insert),
// so a chunk repeated within one run is stored once and counted once.
// Memory: the pipeline's byte budget, whatever the image size.
//
// The source must not change while it is read: a size that differs at the
// end, or a read that ends early, fails the archive (FailedPrecondition).
#pragma once

#include <cstdint>
#include <string>

#include "backup/chunk_writer.h"
#include "base/env.h"
#include "base/logging.h"
#include "crypto/sha256.h"
#include "index/fixed_index.h"
#include "pipeline/progress.h"
#include "store/chunk_source.h"

namespace cairn::backup {

// What the store-chunk step counted (chunks, zero, new and reused), and:
struct ImageStats : ChunkWriterStats {
  uint64_t bytes = 0;
  int reads_final = 0;  // reads of the source in flight at the end
  int reads_max = 0;
  double reads_mean = 0;  // time-weighted
};

struct ImageBackupOptions {
  uint32_t chunk_size = index::kDefaultChunkSize;
  int workers = 0;  // 0: one per core
  int reads = 0;    // reads of the source in flight: 0 = adaptive, N = pinned
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  pipeline::Progress* progress = nullptr;  // optional: Add()s each chunk's bytes
  // Ids known to be in the store (the previous snapshot's index of this
  // archive): never stored again, not even checked.
  const DigestSet* known = nullptr;
  // Encrypt chunks and key their ids with this key (null: plain).
  const crypto::CryptConfig* crypt = nullptr;
};

// Backs up `source` (whose size at start is `size`) into `sink`.
// REQUIRES: options.known, when set, outlives the call.
Result<index::FixedIndex> BackupImage(ReadableFile& source, uint64_t size, store::ChunkSink& sink,
                                      const ImageBackupOptions& options, ImageStats* stats);

}  // namespace cairn::backup
