// TreeArchiveReader: reads one tree archive of a snapshot without restoring
// it: the metadata stream entry by entry (fetching, checking and decoding
// metadata chunks one at a time, so memory stays bounded however many
// entries the tree has) and byte ranges of the payload stream (only the
// chunks the range needs). `cairn ls` and `cairn cat` are built on it, and
// tree restore uses it for the metadata pass.
//
// Thread safety: one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "datastore/datastore.h"
#include "store/chunk_source.h"
#include "tree/tree_format.h"

namespace cairn::restore {

class TreeArchiveReader {
 public:
  // Reads and checks both indexes against the manifest entry.
  // REQUIRES: entry.kind == kTree; store and source outlive the reader.
  static Result<std::unique_ptr<TreeArchiveReader>> Open(const datastore::Datastore& store,
                                                         store::ChunkSource& source,
                                                         const datastore::SnapshotRef& snap,
                                                         const index::ArchiveEntry& entry);

  // The next entry in stream order (root first), nullopt at the end.
  // DataLoss on a bad chunk or malformed stream, naming the archive.
  Result<std::optional<tree::Entry>> Next();

  // Finds the entry at relative path `path` ("" = the root) by scanning the
  // metadata stream from the start (skipping subtrees that cannot hold it).
  // NotFound when absent. Restarts the entry stream.
  Result<tree::Entry> Find(const std::string& path);

  // Calls `out` with the bytes of payload[offset, offset + size) in order,
  // fetching each chunk once (several in flight). Zero chunks are not
  // fetched. REQUIRES: the range lies within the payload stream.
  Status ReadPayload(uint64_t offset, uint64_t size, const std::function<Status(ByteSpan)>& out);

  const index::DynamicIndex& meta_index() const;
  const index::DynamicIndex& data_index() const;

  ~TreeArchiveReader();

 private:
  struct Impl;
  explicit TreeArchiveReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cairn::restore
