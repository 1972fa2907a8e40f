// Tree backup: a directory tree into a tree archive (tree/tree_format.h).
//
// Shape: a walker visits the tree depth-first, children sorted by name (the
// order of the metadata stream), reading metadata (lstat, xattrs) and
// emitting entries; regular files are read by a pool of reader threads, many
// files in flight, their bytes delivered in stream order to the chunker
// (FastCDC, index/chunker.h) on one thread; chunks go to CPU workers (the
// store-chunk step of backup/chunk_writer.h) and their ids land in order in
// the payload index. The metadata stream is chunked the same way.
//
// Its stage meter (pipeline/stage_meter.h) names the bottleneck as image
// backup's does: file reads are source reads, the chunker waiting for the
// walker or the workers waiting for chunks is read wait, the walk's lstat
// and xattrs are metadata, and the store-chunk step times its own parts.
//
// Unchanged files (same size, mtime, ctime and inode as in the previous
// snapshot's archive of the same name) are not read: the chunks of the
// previous payload stream that hold them are appended to the new stream as
// they are (after a forced cut), and the entry points into them.
//
// A file that changes while it is read (size, mtime or ctime differ before
// and after, or it ends early) is reported: a warning names it and it is
// counted in `changed`. What was read is stored, with the size read; it is
// never silently mixed with the metadata of another version.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backup/dedup_base.h"
#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "datastore/snapshot_writer.h"
#include "pipeline/progress.h"

namespace cairn::backup {

struct TreeBackupOptions {
  // Glob patterns (fnmatch) of paths to leave out: a pattern with '/' is
  // matched against the path relative to the source root, one without
  // against each name. An excluded directory is left out whole.
  std::vector<std::string> excludes;
  bool cross_filesystems = false;  // default: stay on the source's filesystem
  bool xattrs = true;
  int workers = 0;  // CPU workers; 0: one per core
  int readers = 0;  // files read in parallel; 0: automatic
  pipeline::Progress* progress = nullptr;
  Logger* logger = nullptr;  // REQUIRED: notes and warnings (sockets, changed files)
  // Every file-system call of the walk and the reads goes through it (Dir);
  // null: the datastore's Env.
  Env* env = nullptr;
};

struct TreeStats {
  uint64_t entries = 0;
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t bytes = 0;           // file content bytes in the archive
  uint64_t read_bytes = 0;      // bytes actually read from the source
  uint64_t reused_files = 0;    // unchanged files not read
  uint64_t reused_bytes = 0;
  uint64_t padding_bytes = 0;   // bytes of reused chunks no file of this snapshot uses
  uint64_t chunks = 0;          // payload + metadata chunks
  uint64_t new_chunks = 0;
  uint64_t new_bytes = 0;
  uint64_t stored_bytes = 0;
  uint64_t meta_bytes = 0;      // metadata stream size
  uint64_t skipped = 0;         // sockets, unreadable, other filesystems
  uint64_t changed = 0;         // files that changed while being read
};

// Backs up the tree at `source_dir` as archive `name` into `writer`; `base`
// is the previous snapshot of the group (dedup and unchanged-file base)
// when there is one.
Status BackupTree(const datastore::Datastore& store, datastore::SnapshotWriter& writer,
                  const DedupBase* base, const std::string& name,
                  const std::string& source_dir, const TreeBackupOptions& options,
                  TreeStats* stats);

}  // namespace cairn::backup
