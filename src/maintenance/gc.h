// Garbage collection: removes chunks that no snapshot references, safely
// beside running backups, restores and verifies (no lock blocks them).
//
//   mark   every index of every finished snapshot, on several threads, into
//          a compact set of 64-bit id prefixes (8 bytes per chunk, sharded
//          open addressing: no pointers). A prefix collision only keeps a
//          chunk that could have gone.
//   sweep  the 4096 prefix directories, on several threads. An unreferenced
//          chunk whose access time is older than the cutoff is renamed to
//          "<id>.trash"; it is deleted at the end of the run if no backup ran
//          at any moment of the run, else by a later run (see below). A
//          referenced "<id>.trash" is put back.
//
// The cutoff is min(start - grace, start of the oldest backup running at the
// start). Backups register in .writers/ before they look up or insert any
// chunk (Datastore::RegisterWriter), set the access time of every chunk
// they find in the store and reuse (LocalChunkStore::Contains), and hold a
// shared lock on their dedup base so it stays referenced. The argument that
// this never removes a chunk a backup is about to reference is in
// docs/ARCHITECTURE.md, "Garbage collection".
//
// State: .gc/lock (one gc at a time), .gc/running (a run in progress, or
// killed), .gc/last.json (the last finished run: times and counts).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "base/status.h"
#include "datastore/datastore.h"
#include "pipeline/progress.h"

namespace cairn::maintenance {

struct GcOptions {
  // Chunks used less than this long before the run started are kept.
  // Backups mark what they use explicitly, so this only absorbs clock steps
  // and coarse file-system timestamps.
  int64_t grace_seconds = 300;
  // Mark and sweep threads; 0 = one per core, at least 16: on a disk,
  // unlink and stat wait on the device, and more in flight overlap.
  int threads = 0;
  bool dry_run = false;
  Logger* logger = nullptr;
  // Phases ("mark", "sweep") and the stage meter (null: the run meters into
  // one of its own). Mark: each index's read and decode, split into the
  // thread's CPU time (decode) and the rest (source reads); sweep: readdir
  // and stat (metadata), renames and unlinks (target writes). The report's
  // `bottleneck` is the meter's verdict.
  pipeline::Progress* progress = nullptr;
};

struct GcReport {
  int64_t start_unix_ns = 0;
  int64_t end_unix_ns = 0;
  int64_t cutoff_unix_ns = 0;
  std::string held_back_by;  // the running backup that set the cutoff, if one did
  uint64_t snapshots = 0;
  uint64_t indexes = 0;
  uint64_t referenced_chunks = 0;  // distinct ids the indexes name
  uint64_t chunk_files = 0;        // chunk files found by the sweep (trash included)
  uint64_t in_use_chunks = 0;      // of those, referenced
  uint64_t removed_chunks = 0;     // deleted (or, in a dry run, that would be)
  uint64_t removed_bytes = 0;
  uint64_t pending_chunks = 0;  // unreferenced but kept: too recent, or set aside
  uint64_t pending_bytes = 0;
  uint64_t restored_chunks = 0;     // set aside by an earlier run, referenced again
  uint64_t removed_temp_files = 0;  // left by killed backups
  uint64_t bad_chunks = 0;          // quarantined by verify (*.bad), kept
  // A backup ran during the run: what was set aside stays until a later run.
  bool deferred = false;
  double mark_seconds = 0;
  double sweep_seconds = 0;
  int threads = 0;
  bool dry_run = false;
  pipeline::Bottleneck bottleneck;  // what limited the run (not kept in last.json)
};

// Unavailable when another gc runs. Fails without removing anything when
// an index of a finished snapshot cannot be read (a chunk it names could
// be removed otherwise): the message names the snapshot and archive.
Result<GcReport> RunGc(const datastore::Datastore& store, const GcOptions& options);

// The report as `cairn gc --json` prints it (counts, "held_back_by_backup",
// "cutoff" as RFC 3339, threads, seconds, "bottleneck" as
// pipeline::BottleneckJson). A gc task on the server keeps the
// same document as its "report", so `cairn gc -r https://…` prints exactly
// what a local gc does.
nlohmann::json GcReportJson(const GcReport& report);

// The last finished run (nullopt when none, or unreadable).
std::optional<GcReport> ReadLastGc(const datastore::Datastore& store);

// Compact set of 64-bit keys (the first 8 bytes of chunk ids), for marking
// tens of millions of chunks in a few hundred MB. Insert is thread-safe;
// Contains must not run concurrently with Insert.
class PrefixSet {
 public:
  PrefixSet();
  ~PrefixSet();
  PrefixSet(const PrefixSet&) = delete;
  PrefixSet& operator=(const PrefixSet&) = delete;

  void Insert(uint64_t key);
  bool Contains(uint64_t key) const;
  uint64_t size() const;
  uint64_t memory_bytes() const;

 private:
  struct Shard;
  Shard* shards_;
};

// The first 8 bytes of a chunk id, big-endian, from a digest or from the
// first 16 hex digits of a chunk file name (nullopt when not hex).
uint64_t IdPrefix(const uint8_t* digest);
std::optional<uint64_t> HexIdPrefix(std::string_view name);

}  // namespace cairn::maintenance
