// Verify: prove that the selected snapshots can be restored.
//
// For each snapshot: the manifest (CRC, schema, name), each image index
// (header CRC, digest checksum, agreement with the manifest) and each blob
// archive (SHA-256 against the manifest). Then every distinct chunk the
// selection references is read once, however many snapshots share it, on
// the fetch pipeline (reads in flight tuned by the concurrency controller,
// checks on all cores): CRC over the stored bytes, decompression, SHA-256
// against its id, length against the index. Damage never stops the run. A snapshot is ok only when all of that holds
// for everything it needs; the result is stored with the snapshot
// (verify.json.blob) without touching the manifest. A corrupt chunk is
// quarantined (renamed to <id>.bad), so a later backup of the same data
// heals the store instead of reusing the damaged copy.
//
// Verify takes no lock: it only reads, and a chunk or snapshot added while
// it runs is simply not part of this run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/logging.h"
#include "datastore/datastore.h"
#include "pipeline/progress.h"

namespace cairn::verify {

struct VerifyOptions {
  // Snapshots to check; empty means every snapshot in the datastore.
  std::vector<datastore::SnapshotRef> snapshots;
  bool record_state = true;  // write verify.json.blob per snapshot
  // Rename a chunk that fails its checks to <id>.bad, so the next backup
  // that meets the same data stores it again (only when reading the
  // datastore's own chunk store, not a wrapped source).
  bool quarantine = true;
  int jobs = 0;              // reads in flight: 0 = adaptive (auto), N = pinned
  int cpu_workers = 0;       // checking threads; 0: one per core
  // Where chunks are read from; null: the datastore's own chunk store.
  store::ChunkSource* source = nullptr;
  Logger* logger = nullptr;  // REQUIRED
  pipeline::Progress* progress = nullptr;  // optional
};

// One damaged thing (a chunk, an index, a manifest, a blob), with every
// snapshot/archive that depends on it.
struct Problem {
  std::string what;   // "chunk 3f2a…", "index disk0.img.fidx", "manifest"
  std::string error;  // the Status message
  bool missing = false;
  std::vector<std::string> affected;  // "vm/100/2026-…Z disk0.img"
};

struct SnapshotResult {
  datastore::SnapshotRef snapshot;
  bool ok = true;
  uint64_t chunks = 0;  // chunk references checked
  uint64_t errors = 0;  // problems that touch this snapshot
};

struct VerifyReport {
  std::vector<SnapshotResult> snapshots;
  std::vector<Problem> problems;
  uint64_t unique_chunks = 0;
  uint64_t stored_bytes = 0;  // bytes read from the store
  uint64_t raw_bytes = 0;     // decoded bytes checked
  double seconds = 0;
  int jobs_final = 0;  // reads in flight at the end
  int jobs_max = 0;
  bool ok() const { return problems.empty(); }
};

// An error is returned only when verify could not run at all (the datastore
// is unreadable); damage found is in the report.
Result<VerifyReport> RunVerify(const datastore::Datastore& store, const VerifyOptions& options);

}  // namespace cairn::verify
