// Tree restore: a tree archive into a directory.
//
// Metadata first: the metadata stream is read in order; directories are
// created as they appear (owner-only mode until the end), symlinks, fifos
// and device nodes at once. Regular files are gathered in batches (bounded
// in files and payload bytes, so memory is bounded by the batch, not the
// tree); each batch is one run of the fetch pipeline: every distinct chunk
// its files need is fetched once, out of order, with many reads in flight,
// checked on all cores, and pwritten into every file (and offset) that
// holds part of it. All-zero chunks are never fetched: files are created at
// their full size, so zero ranges stay holes (sparse files). After a batch's
// data: its hardlinks are made and its files' metadata applied (owner when
// root, mode, xattrs incl. ACLs, mtime). Directory metadata is applied last,
// deepest first, so directory times survive the restore of their children.
//
// Safety: every object is created through a Dir (base/env.h: relative to a
// directory fd, with O_NOFOLLOW / AT_SYMLINK_NOFOLLOW and O_EXCL), below a
// target directory that must be new or empty; the decoder has already
// refused names with '/', "..", and duplicates. Nothing outside the target
// is ever created or changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/env.h"
#include "datastore/datastore.h"
#include "pipeline/progress.h"
#include "store/chunk_source.h"

namespace cairn::restore {

struct TreeRestoreOptions {
  // Restore only entries whose path, or an ancestor's, matches one of these
  // glob patterns (fnmatch on the relative path; a pattern without '/' also
  // matches any single name). Empty: everything. Ancestors of a restored
  // entry are created with their own metadata.
  std::vector<std::string> includes;
  bool rehearse = false;  // fetch, decode and check the needed chunks; write nothing
  int jobs = 0;           // reads in flight: 0 = adaptive, N = pinned
  int cpu_workers = 0;    // 0: one per core
  uint64_t max_bytes_in_flight = uint64_t{256} << 20;
  pipeline::Progress* progress = nullptr;  // optional
  // Every file-system call on the target goes through it (Dir); null: the
  // datastore's Env.
  Env* env = nullptr;
};

struct TreeRestoreStats {
  uint64_t entries = 0;  // restored entries of every kind
  uint64_t dirs = 0;
  uint64_t files = 0;
  uint64_t symlinks = 0;
  uint64_t hardlinks = 0;
  uint64_t specials = 0;       // fifos and device nodes
  uint64_t bytes = 0;          // file content bytes restored
  uint64_t fetched_bytes = 0;  // plaintext bytes of the chunks fetched
  uint64_t chunks = 0;         // chunks fetched (each distinct chunk once per batch)
  uint64_t zero_bytes = 0;     // content left as holes (all-zero chunks)
  int jobs_final = 0;          // reads in flight at the end
  double seconds = 0;
  std::vector<std::string> warnings;  // xattrs the target refused, etc.
};

// Restores the tree archive `entry` of `snap` into `target_dir`, which must
// not exist (it is created) or be an empty directory. Errors name the
// snapshot, archive and path. REQUIRES: entry.kind == kTree.
Result<TreeRestoreStats> RestoreTree(const datastore::Datastore& store, store::ChunkSource& source,
                                     const datastore::SnapshotRef& snap,
                                     const index::ArchiveEntry& entry,
                                     const std::string& target_dir,
                                     const TreeRestoreOptions& options);

}  // namespace cairn::restore
