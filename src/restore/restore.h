// Restore of one archive of a snapshot to a target path, a device or "-".
#pragma once

#include <string>

#include "datastore/datastore.h"
#include "restore/image_restore.h"

namespace cairn::restore {

struct RestoreRequest {
  datastore::SnapshotSpec snapshot;
  std::string archive;  // "disk0.img", "vm.conf.blob"
  std::string target;   // path or "-"
  bool overwrite = false;
  int jobs = 0;  // reads in flight: 0 = auto (adaptive), N = pinned
  // Where chunks are read from; null: the datastore's own chunk store.
  // (Benchmarks wrap it in a store::InjectingSource.) Must outlive the call.
  store::ChunkSource* source = nullptr;
  int cpu_workers = 0;  // checking threads; 0: one per core
};

struct RestoreReport {
  datastore::SnapshotRef snapshot;
  std::string archive;
  std::string target;
  ImageRestoreStats stats;
  double seconds = 0;
};

// Errors name the snapshot, archive and target.
Result<RestoreReport> RunRestore(const datastore::Datastore& store, const RestoreRequest& request);

}  // namespace cairn::restore
