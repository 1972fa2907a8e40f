// DedupBase: the snapshot a backup builds on, read once per backup.
//
// RunBackup picks the group's latest finished snapshot (and holds its
// shared lock for the whole run); Open reads its manifest and its verify
// state once, and each archive then reads only its own indexes of it: an
// image archive the ids of its fixed index (never stored again, not even
// checked), a tree archive its two dynamic indexes (unchanged files reuse
// the payload chunks; every id of both is known).
//
// Thread safety: immutable after Open; read from any thread.
#pragma once

#include <optional>
#include <string>

#include "backup/chunk_writer.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "index/manifest.h"

namespace cairn::backup {

class DedupBase {
 public:
  // Whether a backup may use `prev` at all: false (logged) when it was
  // made with another key or none while this backup encrypts, or the other
  // way round (chunk ids differ between keys). A manifest that cannot be
  // read does not say no (the base is then simply empty).
  static bool SameKey(const datastore::Datastore& store, const datastore::SnapshotRef& prev,
                      const Result<index::Manifest>& manifest, Logger& log);

  // The base of a backup whose previous snapshot is `prev` with manifest
  // `manifest` (as read by the caller): nullopt when there is none, its
  // manifest could not be read, or it failed its last verify (logged).
  static std::optional<DedupBase> Open(const datastore::Datastore& store,
                                       const datastore::SnapshotRef& prev,
                                       Result<index::Manifest> manifest, Logger& log);

  const datastore::SnapshotRef& snapshot() const { return snapshot_; }
  const index::Manifest& manifest() const { return manifest_; }

  // Archive `name` of `kind` in the base, or null.
  const index::ArchiveEntry* Find(const std::string& name, index::ArchiveKind kind) const;

  // Adds the ids of image archive `name` to `known`; false (a warning when
  // its index cannot be read) when the base has no such archive.
  bool AddImageIds(const datastore::Datastore& store, const std::string& name, Logger& log,
                   DigestSet* known) const;

 private:
  DedupBase(datastore::SnapshotRef snapshot, index::Manifest manifest)
      : snapshot_(std::move(snapshot)), manifest_(std::move(manifest)) {}

  datastore::SnapshotRef snapshot_;
  index::Manifest manifest_;
};

}  // namespace cairn::backup
