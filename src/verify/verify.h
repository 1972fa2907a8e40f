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
// it runs is simply not part of this run; a snapshot removed while it runs
// is dropped from the report quietly.
//
// The ledger (verify/ledger.h) remembers every chunk's last check: a run
// with outdated_after skips chunks found ok more recently; a run that was
// interrupted (killed, or cut short by max_duration or budget) is resumed
// by the next run of the same scope, which skips what it already did; and
// a slice (max_duration, budget) takes the stalest chunks first, so
// repeated slices cover the whole store (rolling verify).
//
// The chunks of a run are read in the order that suits the medium: by id
// (directory order of the local store), or by inode on a spinning disk,
// where inode order follows the on-disk layout closely enough to turn
// random seeks into a sweep (Proxmox Backup Server does the same). The
// order is chosen after the slice: it changes how, never what, is read.
//
// Coverage promise (cover_days = N, for a job run at least daily): every
// chunk not found ok within the last N-1 days (or never) is due and is
// checked by this run, past any slice limit and any skip; a daily run then
// reaches a chunk before its last check is N days old. On top of the due
// chunks comes the slice (the caller's limit, or else an even daily pace,
// see VerifyReport::pace_bytes).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/logging.h"
#include "datastore/datastore.h"
#include "pipeline/progress.h"

namespace cairn::verify {

// The order distinct chunks are read in.
enum class ChunkOrder {
  kAuto,   // kInode when the datastore sits on a rotational device, else kId
  kId,     // sorted by id: directory order of the local store
  kInode,  // sorted by the inode of each chunk file (stat'ed first, in parallel)
};
std::string_view ChunkOrderName(ChunkOrder order);  // "auto", "id", "inode"
// InvalidArgument for anything but "auto", "id" and "inode".
Result<ChunkOrder> ParseChunkOrder(std::string_view text);

// True when the block device holding `path` is rotational, per
// /sys/dev/block/MAJ:MIN/queue/rotational (the parent device's queue for a
// partition). False when unknown: no block device (tmpfs, overlay, NFS,
// btrfs), no sysfs, or `path` missing. Virtual disks often claim to be
// rotational; inode order costs little there.
bool IsRotational(const std::string& path);

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
  // Record results in, and read them from, DATASTORE/.ledger.
  bool use_ledger = true;
  // Skip chunks whose last check, at most this many seconds ago, was ok.
  // 0: check everything (the ledger still records).
  int64_t outdated_after_s = 0;
  // A slice: start no chunk after this long (0: no limit), or beyond this
  // share of the selected bytes (0: all). Stalest chunks first.
  int64_t max_duration_ns = 0;
  double budget = 0;
  // Names the selection, so that an interrupted run is resumed only by a
  // run over the same snapshots ("" = the whole datastore).
  std::string scope;
  // Read order. With a custom `source` always kId (its layout is unknown).
  ChunkOrder order = ChunkOrder::kAuto;
  // The coverage promise, in days (0: none; at most 36500): chunks not found
  // ok within cover_days - 1 days are checked now whatever the slice limit,
  // outdated_after or a resumed job say. Without max_duration and budget
  // the slice is the even pace (VerifyReport::pace_bytes).
  int cover_days = 0;
  // Tests: receives the id of every chunk to be read, in reading order (the
  // order the pipeline starts them), as each stretch is planned.
  std::vector<crypto::Digest>* planned_reads = nullptr;
  // Optional: once it reads true, no further chunk starts and the run ends
  // as a max_duration slice does (the rest left for the next run of the
  // scope). The server's verify tasks use it to stop at shutdown.
  const std::atomic<bool>* cancel = nullptr;
};

// One damaged thing (a chunk, an index, a manifest, a blob), with every
// snapshot/archive that depends on it.
struct Problem {
  std::string what;   // "chunk 3f2a…", "index disk0.img.fidx", "manifest"
  std::string error;  // the Status message
  bool missing = false;
  std::vector<std::string> affected;  // "vm/100/2026-…Z disk0.img"
  // For a chunk: where each affected archive holds it, as (offset, length)
  // image byte ranges, in the order of `affected`.
  std::vector<std::vector<std::pair<uint64_t, uint32_t>>> ranges;
};

struct SnapshotResult {
  datastore::SnapshotRef snapshot;
  bool ok = true;
  bool complete = true;  // false: a slice left some of its chunks for later
  bool vanished = false;  // removed while verify ran (internal: never in a report)
  // False for an encrypted snapshot verified without its key: only the
  // stored checksums were checked, not the content.
  bool content_checked = true;
  uint64_t chunks = 0;   // chunk references checked
  uint64_t errors = 0;   // problems that touch this snapshot
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
  double jobs_mean = 0;  // time-weighted
  uint64_t selected_bytes = 0;  // plaintext bytes of the distinct chunks selected
  uint64_t checked_chunks = 0;  // read and checked by this run
  // Of those, chunks of encrypted snapshots whose key was not given: their
  // stored checksum was checked, their content was not (and the ledger does
  // not count them as verified).
  uint64_t keyless_chunks = 0;
  uint64_t fresh_chunks = 0;    // skipped: ok in the ledger within outdated_after
  uint64_t fresh_bytes = 0;
  uint64_t resumed_chunks = 0;  // skipped: done by the interrupted run this one resumed
  uint64_t resumed_bytes = 0;
  uint64_t left_chunks = 0;     // not reached: left by max_duration or budget
  uint64_t left_bytes = 0;
  int64_t resumed_from = 0;     // unix start of the run resumed; 0: none
  int64_t oldest_check = 0;     // unix time of the stalest ok chunk after this run; 0: none
  std::string ledger_warning;
  ChunkOrder order = ChunkOrder::kId;  // the order chunks were read in (never kAuto)
  // With cover_days. Due: not found ok within cover_days - 1 days (or
  // never) when this run started, so checked by it.
  uint64_t due_chunks = 0;
  uint64_t due_bytes = 0;
  // The due chunks alone were more than budget allowed, or took longer than
  // max_duration; they were checked anyway.
  bool due_over_limit = false;
  // Of the distinct chunks, after this run: found ok within the last
  // cover_days days, and never found ok.
  uint64_t covered_chunks = 0;
  uint64_t never_checked_chunks = 0;
  // The bytes a day that keep the promise when spread evenly, as the ledger
  // stood before this run: the most, over k = 1..cover_days, of the bytes
  // due by the k-th daily run from now, divided by k. Settles at
  // selected_bytes / cover_days once the checks are spread out.
  uint64_t pace_bytes = 0;
  bool ok() const { return problems.empty(); }
};

// The snapshots `cairn verify` (and a server's verify task) selects by
// `text` in namespace `ns`: "" = all (the whole datastore when `ns` is the
// root: an empty list), "TYPE/ID" = a group, else one snapshot. NotFound
// when a namespace or group has no snapshots.
Result<std::vector<datastore::SnapshotRef>> SelectSnapshots(const datastore::Datastore& store,
                                                            const std::string& ns,
                                                            const std::string& text);

// An error is returned only when verify could not run at all (the datastore
// is unreadable); damage found is in the report.
Result<VerifyReport> RunVerify(const datastore::Datastore& store, const VerifyOptions& options);

}  // namespace cairn::verify
