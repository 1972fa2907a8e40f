// Opening archives of a snapshot for instant access: the reader of an image
// archive through the shared cache, and the settings every reader of one
// mount or export shares (cache, chunk source, readahead).
#pragma once

#include <memory>
#include <string>

#include "access/chunk_cache.h"
#include "access/stream_reader.h"
#include "datastore/datastore.h"

namespace cairn::access {

struct ReaderSettings {
  ChunkCache* cache = nullptr;           // REQUIRED; outlives the readers
  store::ChunkSource* source = nullptr;  // REQUIRED; outlives the readers
  ReadaheadOptions readahead;
};

// Readahead sized to a cache: a stream's window grows to a quarter of it
// (from 8 MiB to at most 256 MiB), so several streams fit at once.
ReadaheadOptions ReadaheadFor(uint64_t cache_bytes, int jobs);

// "archive disk0.img of vm/100/2026-11-30T05:00:00Z".
std::string DescribeArchive(const datastore::SnapshotRef& snap, const std::string& archive);

// The reader of image archive `entry` of `snap`: its index read and checked
// against the manifest, zero chunks known, chunks decoded with the
// snapshot's key (Datastore::CryptFor; FailedPrecondition without it).
// InvalidArgument when `entry` is not an image.
Result<std::unique_ptr<StreamReader>> OpenImageReader(const datastore::Datastore& store,
                                                      const datastore::SnapshotRef& snap,
                                                      const index::ArchiveEntry& entry,
                                                      const ReaderSettings& settings);

}  // namespace cairn::access
