// TreeArchiveReader: reads one tree archive of a snapshot without restoring
// it: the metadata stream entry by entry and byte ranges of the payload
// stream (only the chunks the range needs). The one reader of tree
// archives: `cairn ls` and `cat`, tree restore's metadata pass, a tree
// backup's base (the previous snapshot's entries), the mount's and the
// dashboard's trees.
//
// The metadata stream is fetched in windows of up to 16 MiB of plaintext on
// the fetch pipeline (reads in flight under the source's rule, checked and
// decoded on its workers), so a remote or object-store source costs one
// round trip per window, not per chunk, and memory stays bounded however
// many entries the tree has. A window with a damaged chunk is read again
// one chunk at a time, so the entries before the damage still come out and
// the error is the damaged chunk's, where the stream reaches it.
//
// All-zero payload chunks are recognised by their id, which is the SHA-256
// of that many zero bytes, and never fetched. The zero id of a length costs
// hashing that many zeros, so only the lengths that recur in the payload
// index are candidates (a run of zeros cuts into chunks of one length, the
// chunker being deterministic; a one-off length almost never holds only
// zeros): at most kMaxZeroLengths of them, the most frequent, each hashed
// once, when first needed. A zero chunk missed this way is fetched like
// any other, which is merely slower.
//
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chunkio/chunk_read.h"
#include "datastore/datastore.h"
#include "store/chunk_source.h"
#include "tree/tree_format.h"

namespace cairn::chunkio {

class TreeArchiveReader {
 public:
  static constexpr size_t kMaxZeroLengths = 16;

  // Reads and checks both indexes against the manifest entry; the manifest
  // says whether the snapshot is encrypted (then the datastore's key must be
  // the snapshot's: Datastore::CryptFor).
  // REQUIRES: entry.kind == kTree; store and source outlive the reader.
  static Result<std::unique_ptr<TreeArchiveReader>> Open(const datastore::Datastore& store,
                                                         store::ChunkSource& source,
                                                         const datastore::SnapshotRef& snap,
                                                         const index::ArchiveEntry& entry);

  // A reader of indexes already read, of an archive whose chunks `crypt`
  // decodes (null: plain), e.g. for a backup whose base manifest is read
  // already. `description` names the archive in errors.
  // REQUIRES: source outlives the reader.
  static std::unique_ptr<TreeArchiveReader> FromIndexes(store::ChunkSource& source,
                                                        datastore::Datastore::TreeIndexes indexes,
                                                        const crypto::CryptConfig* crypt,
                                                        std::string description);

  // The next entry in stream order (root first), nullopt at the end.
  // DataLoss on a bad chunk or malformed stream, naming the archive.
  Result<std::optional<tree::Entry>> Next();

  // Finds the entry at relative path `path` ("" = the root) by scanning the
  // metadata stream from the start, stopping as soon as the stream (which is
  // sorted, component by component) has passed where it would be.
  // NotFound when absent. Restarts the entry stream.
  Result<tree::Entry> Find(const std::string& path);

  // Starts the entry stream over from the root.
  void Restart();

  // Calls `out` with the bytes of payload[offset, offset + size) in order,
  // fetching each chunk once (several in flight, in windows of at most
  // 64 MiB). Zero chunks are not fetched. OutOfRange when the range does
  // not lie within the payload stream.
  Status ReadPayload(uint64_t offset, uint64_t size, const std::function<Status(ByteSpan)>& out);

  // True when payload chunk `i` is known to be all zeros (see file comment).
  bool IsZeroChunk(size_t i);

  // The key of an encrypted snapshot (null when plain): decodes its chunks.
  const crypto::CryptConfig* crypt() const;
  const index::DynamicIndex& meta_index() const;
  const index::DynamicIndex& data_index() const;
  // "archive root.tree of host/srv/2026-11-30T05:00:00Z", for messages.
  const std::string& description() const;
  // Metadata windows fetched so far (each one pipeline run), for tests.
  uint64_t metadata_fetches() const;

  ~TreeArchiveReader();

 private:
  struct Impl;
  explicit TreeArchiveReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// For each chunk of a payload index, 1 when it is known to hold only zeros
// (by the rule of the file comment: the recurring lengths' zero ids), all
// at once, for readers that share the answer across threads.
std::vector<uint8_t> FindZeroChunks(const index::DynamicIndex& idx,
                                    const crypto::CryptConfig* crypt);

}  // namespace cairn::chunkio
