// Restore of a snapshot: one archive to a target path, a device or "-", or
// every archive at once (--all DIR) under one shared pipeline and budget.
// Tree archives restore into a new or empty directory (restore/tree_restore.h),
// after the images and before the blobs; they take no --overwrite,
// --in-place or "-".
#pragma once

#include <string>
#include <vector>

#include "datastore/datastore.h"
#include "restore/image_restore.h"
#include "restore/tree_restore.h"

namespace cairn::restore {

struct RestoreRequest {
  datastore::SnapshotSpec snapshot;
  std::string archive;  // "disk0.img", "vm.conf.blob", "root.tree"; empty with `all`
  std::string target;   // path or "-" (not for trees); with `all`, the directory
  bool overwrite = false;
  int jobs = 0;  // reads in flight: 0 = auto (adaptive), N = pinned
  // Where chunks are read from; null: the datastore's own chunk store.
  // (Benchmarks wrap it in a store::InjectingSource.) Must outlive the call.
  store::ChunkSource* source = nullptr;
  int cpu_workers = 0;  // checking threads; 0: one per core
  // Every archive of the snapshot into the directory `target`: images as
  // DIR/NAME.img, blobs as DIR/NAME without ".blob", trees into DIR/NAME
  // without ".tree".
  bool all = false;
  bool in_place = false;  // rewrite only the chunks of an existing target that differ
  bool rehearse = false;  // fetch, decode and check everything; write nothing
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  pipeline::Progress* progress = nullptr;  // optional
  // Trees only: restore just the entries matching these patterns (and
  // their ancestors); see TreeRestoreOptions::includes.
  std::vector<std::string> includes;
  // Images only: writes go through it (restore --instant).
  RestoreGate* gate = nullptr;
  // Where image, tree and blob targets are written; null: the datastore's Env.
  // (`restore --inject-write-latency` slows the target with a
  // FaultInjectionEnv.) Must outlive the call.
  Env* target_env = nullptr;
};

struct ArchiveResult {
  std::string archive;
  std::string target;
  index::ArchiveKind kind = index::ArchiveKind::kImage;
  // Blobs: bytes, written_bytes and seconds. Trees: bytes, fetched_bytes,
  // chunks_fetched, zero_bytes and seconds, copied from `tree`.
  ImageRestoreStats stats;
  TreeRestoreStats tree;  // trees only
};

struct RestoreReport {
  datastore::SnapshotRef snapshot;
  bool encrypted = false;  // the snapshot was encrypted (and its signature checked)
  std::vector<ArchiveResult> archives;  // in manifest order
  double seconds = 0;
};

// Where --all puts an archive inside `dir`.
std::string AllTargetPath(const std::string& dir, const index::ArchiveEntry& entry);

// Errors name the snapshot, archive and target.
Result<RestoreReport> RunRestore(const datastore::Datastore& store, const RestoreRequest& request);

}  // namespace cairn::restore
