// Internals of verify shared by its source files (verify.cc runs a verify,
// collect.cc gathers the chunk references of the selected snapshots,
// read_order.cc orders the reads for the medium). Not an interface: only
// src/verify/ includes it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/env.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "datastore/datastore.h"
#include "index/manifest.h"
#include "store/local_chunk_store.h"
#include "verify/verify.h"

namespace cairn::verify::detail {

// One chunk reference: 44 bytes, the bulk of verify's memory (a datastore
// of 100 M chunk references needs ~4.4 GB here, and nothing else per use).
struct ChunkUse {
  crypto::Digest id;
  uint32_t length;
  uint32_t archive;   // index into Collected::archives
  uint32_t position;  // chunk number in the archive
};
static_assert(sizeof(ChunkUse) == 44);

// How the chunks of one archive are checked: plain (key null, not keyless),
// with the snapshot's key, or, for an encrypted snapshot whose key is not
// at hand (keyless), by their stored checksum only.
struct ArchiveCrypt {
  const crypto::CryptConfig* key = nullptr;
  bool keyless = false;
};

struct Collected {
  std::vector<std::string> archives;                // "vm/100/… disk0.img"
  std::vector<size_t> archive_snapshot;             // archive → index into snapshots
  std::vector<uint32_t> archive_chunk_size;         // archive → its chunk size; 0: a tree stream
  std::vector<std::vector<uint64_t>> archive_ends;  // tree streams: chunk end offsets
  std::vector<ArchiveCrypt> archive_crypt;          // archive → how its chunks decode

  uint64_t Offset(const ChunkUse& use) const {
    uint32_t cs = archive_chunk_size[use.archive];
    if (cs != 0) return uint64_t{use.position} * cs;
    return use.position == 0 ? 0 : archive_ends[use.archive][use.position - 1];
  }
  std::vector<ChunkUse> uses;
};

void AddProblem(VerifyReport* report, std::string what, const Status& s,
                std::vector<std::string> affected);

// Reads the manifest of one snapshot; null when it is damaged (reported)
// or the snapshot was removed since the listing (quietly).
std::optional<index::Manifest> ReadManifestOf(const datastore::Datastore& store, size_t snap_idx,
                                              VerifyReport* report);

// Reads every index and blob of one snapshot, adding its chunk uses.
void CollectSnapshot(const datastore::Datastore& store, size_t snap_idx,
                     const index::Manifest& manifest, VerifyReport* report, Collected* c);

// Sorts `stretch` (indexes into `unique`, which indexes `uses`) by the
// inode of each chunk's file in `chunks`, stat'ing them on a few threads
// (metadata only). Ties, and chunks whose file cannot be stat'ed (missing:
// their read reports it), keep id order; the latter go last.
void SortByInode(Env& env, const store::LocalChunkStore& chunks, const std::vector<ChunkUse>& uses,
                 const std::vector<uint32_t>& unique, std::span<uint32_t> stretch);

// The order this run reads in: id for a source that is not a local chunk
// store, else the option, and for auto inode order on a spinning disk.
ChunkOrder ResolveOrder(const datastore::Datastore& store, const VerifyOptions& options);

}  // namespace cairn::verify::detail
