// Internals of sync shared by its source files: which snapshots a run
// covers (sync_plan.cc) and what one snapshot is made of, read as stored.
// Not an interface: only src/sync/ includes it.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"
#include "crypto/sha256.h"
#include "datastore/datastore.h"
#include "index/manifest.h"
#include "sync/sync.h"

namespace cairn::sync::detail {

using IdSet = std::unordered_set<crypto::Digest, crypto::DigestHash>;

// What a run looks at: the SRC snapshots to copy (grouped, oldest first in
// each group) and the groups it covers (for remove_vanished: only groups
// named as groups, or all that pass the filters when none is named).
struct Selection {
  std::vector<datastore::SnapshotRef> snapshots;
  std::vector<datastore::GroupRef> groups;
  std::vector<datastore::SnapshotRef> src_all;  // every SRC snapshot (for remove_vanished)
};
Result<Selection> Select(const datastore::Datastore& src, const SyncOptions& options);

// Where a SRC group or snapshot lands on DST (options.ns → target_ns).
datastore::GroupRef ToDst(const datastore::GroupRef& group, const SyncOptions& options);
datastore::SnapshotRef ToDst(const datastore::SnapshotRef& snap, const SyncOptions& options);
// Whether namespace `ns` is covered: within options.ns, max_depth below it.
bool InScope(const std::string& ns, const SyncOptions& options);

// "vm/100/TIME", or "a/b:vm/100/TIME" in a namespace.
std::string DisplayName(const datastore::SnapshotRef& snap);

struct ChunkRef {
  crypto::Digest id;
  uint32_t length = 0;  // decoded, from the index
};

// One snapshot as stored: the manifest, every archive file, checked as
// readers check them (indexes against the manifest, blobs by SHA-256), and
// the distinct chunks its indexes name.
struct SnapshotFiles {
  Bytes manifest_stored;
  index::Manifest manifest;
  std::vector<std::pair<std::string, Bytes>> files;  // empty unless keep_bytes
  std::vector<ChunkRef> chunks;
};
// DataLoss naming the snapshot, the store and the file when anything fails
// its check; NotFound when the snapshot is gone.
Result<SnapshotFiles> ReadSnapshotFiles(const datastore::Datastore& store,
                                        const datastore::SnapshotRef& snap, bool keep_bytes);

}  // namespace cairn::sync::detail
