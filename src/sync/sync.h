// Sync: copies snapshots from one datastore to another (`cairn sync --from
// SRC --to DST`), where each side is any repository cairn opens: a path, a
// server (https://HOST:PORT/STORE) or an object store (s3://…). Both are
// datastore::Datastore objects, so pull (server → path), push (path →
// server), path ↔ path and path ↔ S3 are this one code.
//
// The algorithm, per snapshot to copy (oldest first within each group):
//   1. SRC's manifest, indexes and blobs are read as stored bytes and checked
//      as every reader checks them (indexes against the manifest's sizes and
//      checksums, blobs against their SHA-256), keeping the stored bytes.
//   2. The distinct chunk ids of its indexes are the candidates. Skipped
//      without any I/O: the chunks of DST's dedup base (the group's newest
//      snapshot on DST, or the one this run copied last), and, for a DST that
//      is not a server, chunks this run already copied. On a path or an
//      object store, DST is asked (Contains) in the I/O stage.
//   3. A DST session (SnapshotTarget: the snapshot directory, or a backup
//      session on a server with the base declared) is opened, then the
//      missing chunks run through the fetch pipeline: the I/O stage reads
//      the stored bytes from SRC (reads in flight chosen by the adaptive
//      controller, or --jobs), the CPU stage checks them on arrival and
//      inserts them raw into DST's sink (on a path, their whole pages past
//      the page cache: LocalChunkStore::InsertAbsentDirect). The check: the
//      blob's CRC, its mode against the manifest's (an encrypted snapshot's
//      chunks are encrypted, a plain one's are not), and for a plain chunk
//      its decompressed content hashed against its id. No key is needed and
//      nothing is decrypted.
//   4. The index and blob files are written, then (not through a server)
//      the notes, the protection mark with keep_protected and the sync
//      marker `.sync-source`; the manifest comes last (SnapshotTarget::
//      Commit flushes the chunks first). A sync killed before that rename
//      leaves an unfinished directory no reader lists; the next run (or
//      backup) replaces it and finds the chunks already there.
//
// What a snapshot on DST that exists already under the same name is: left
// alone (counted as present). With remove_vanished, snapshots of the
// selected groups on DST whose marker names this SRC and that SRC no longer
// has are forgotten (never protected ones; docs/FORMAT.md, "Sync marker").
//
// Thread safety: RunSync blocks the caller; one run per DST group at a time
// (the group lock of the target, as for a backup).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/logging.h"
#include "base/status.h"
#include "datastore/datastore.h"
#include "datastore/sync_marker.h"
#include "pipeline/progress.h"
#include "store/chunk_source.h"
#include "sync/group_filter.h"

namespace cairn::sync {

// The marker in a snapshot directory that sync created: JSON
// {"source": "<SRC as the user named it>", "synced_unix": N}.
using datastore::kSyncMarkerFileName;

struct SyncOptions {
  // GROUP ("vm/100") or SNAPSHOT ("vm/100/TIME", "vm/100/latest") names in
  // namespace `ns`; empty: every group.
  std::vector<std::string> selection;
  // Only this namespace and those below it ("" = all of them).
  std::string ns;
  // Where `ns` lands on DST: a snapshot in ns/REST goes to target_ns/REST
  // (PBS's namespace mapping; "" with ns "" = the same names). The manifest
  // keeps the namespace it was made in (an encrypted one is signed), so a
  // mapping needs a DST this client writes itself (a path or s3://).
  std::string target_ns;
  // Namespace levels below `ns` that are synced: 0 = `ns` itself only,
  // -1 = all.
  int max_depth = -1;
  GroupFilter filter;
  int transfer_last = 0;       // > 0: only the newest N (that pass the other filters) of each group
  bool verified_only = false;  // only snapshots whose last verify on SRC passed
  bool encrypted_only = false;  // only encrypted snapshots
  bool keep_protected = false;  // carry SRC's protection mark over
  bool remove_vanished = false;
  // Snapshots DST has whose last verify there failed get every chunk DST
  // lacks (verify quarantined the bad ones) copied again from SRC; towards
  // a server, every chunk of the snapshot goes through a repair session
  // (the server keeps its valid copies and replaces damaged ones).
  bool resync_corrupt = false;
  bool dry_run = false;
  uint64_t limit_rate = 0;  // bytes of chunks read per second; 0: no limit
  int jobs = 0;             // reads in flight: 0 = adaptive
  int cpu_workers = 0;      // 0: one per core
  // How the marker names SRC (remove_vanished only removes what it names).
  std::string source_name;
  // Towards a server, whose backup session takes archive files only: sets
  // the notes (non-empty) and the protection (true) of a snapshot just
  // committed there (the CLI asks the server's API). A failure is a warning:
  // the snapshot itself is there. Null: neither carries over.
  std::function<Status(const datastore::SnapshotRef&, std::string_view notes, bool protect)>
      set_on_server;
  // Towards a server (resync_corrupt): opens a repair session for a
  // snapshot there (remote::RemoteStoreBackend::BeginRepair); dst.sink()
  // uploads into it while the target lives.
  std::function<Result<std::unique_ptr<datastore::SnapshotTarget>>(const datastore::SnapshotRef&)>
      begin_repair_on_server;
  // Towards a server: forgets a snapshot there (remove_vanished; the CLI
  // asks the server's API, which checks the token's right to forget).
  std::function<Status(const datastore::SnapshotRef&)> forget_on_server;
  // Set (by another thread) to stop: no further snapshot or chunk starts,
  // the run ends with Cancelled; the snapshots committed so far stay.
  const std::atomic<bool>* cancel = nullptr;
  Logger* logger = nullptr;                // REQUIRED
  pipeline::Progress* progress = nullptr;  // optional
  // Where chunks are read instead of src.source() (a latency wrapper for
  // benchmarks); null: src.source().
  store::ChunkSource* source = nullptr;
};

struct SnapshotOutcome {
  std::string name;  // "vm/100/2026-…" (with "ns:" in front in a namespace)
  // "copied", "would copy", "present", "resynced", "would resync", "removed", "would remove"
  std::string action;
  uint64_t chunks_copied = 0;
  uint64_t chunks_skipped = 0;  // DST had them
  uint64_t stored_bytes = 0;    // bytes of chunks copied, as stored
  uint64_t raw_bytes = 0;       // what those chunks decode to (from the index)
  double seconds = 0;
};

struct SyncReport {
  std::vector<SnapshotOutcome> snapshots;
  uint64_t copied = 0;   // snapshots
  uint64_t present = 0;  // snapshots DST had
  uint64_t removed = 0;
  uint64_t resynced = 0;  // snapshots --resync-corrupt healed
  uint64_t chunks_copied = 0;
  uint64_t chunks_skipped = 0;
  uint64_t stored_bytes = 0;
  uint64_t raw_bytes = 0;
  double seconds = 0;
  int peak_reads_in_flight = 0;
};

// The report as `cairn sync --json` prints it (without "from", "to",
// "dry_run") and a server's sync task keeps it.
nlohmann::json SyncReportJson(const SyncReport& report);
// The report as `cairn sync` prints it: one line per snapshot copied,
// resynced or removed, then the summary line.
std::vector<std::string> SyncReportLines(const SyncReport& report, bool dry_run);

// Runs a sync. Errors name the snapshot and chunk: DataLoss for a chunk or
// file of SRC that fails its check (nothing of that snapshot appears on
// DST), NotFound for a selected group or snapshot SRC does not have,
// PermissionDenied/Unauthenticated as a server answers, FailedPrecondition
// for remove_vanished towards a server. The snapshots committed before an
// error stay (each is whole).
Result<SyncReport> RunSync(const datastore::Datastore& src, const datastore::Datastore& dst,
                           const SyncOptions& options);

}  // namespace cairn::sync
