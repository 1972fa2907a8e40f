// Internals of verify shared by its source files (verify.cc runs a verify,
// collect.cc gathers the chunk references of the selected snapshots,
// read_order.cc orders the reads for the medium, check_chunks.cc reads and
// checks them). Not an interface: only
// src/verify/ includes it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/env.h"
#include "base/mutex.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "datastore/datastore.h"
#include "index/manifest.h"
#include "store/chunk_source.h"
#include "store/local_chunk_store.h"
#include "verify/ledger.h"
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

// What became of each distinct chunk in this run: one byte each, and the
// errors (rare) apart, so memory stays small per chunk.
class Outcomes {
 public:
  enum : uint8_t { kOk = 0, kNotReached = 1, kFailed = 2 };
  explicit Outcomes(size_t n) : state_(n, kOk) {}
  uint8_t state(size_t u) const { return state_[u]; }
  void SetNotReached(size_t u) { state_[u] = kNotReached; }
  void SetOk(size_t u) { state_[u] = kOk; }
  void SetError(size_t u, Status s) {
    MutexLock lock(mu_);
    state_[u] = kFailed;
    errors_[u] = std::move(s);
  }
  Status error(size_t u) const {
    MutexLock lock(mu_);
    auto it = errors_.find(u);
    return it == errors_.end() ? Status::Ok() : it->second;
  }

 private:
  std::vector<uint8_t> state_;  // distinct elements per chunk: no lock needed
  mutable Mutex mu_;
  std::unordered_map<size_t, Status> errors_ GUARDED_BY(mu_);
};

// Reads and checks the chunks `todo` (indexes into `unique`, which indexes
// `uses`) in order; each outcome lands in `out`, each verdict in `ledger`
// (null: none) at `stamp` or later. The first `due` chunks are
// read whatever the time; past max_duration no other chunk starts, and the
// ones not reached stay kNotReached. With `by_inode` (a local store), `todo`
// is reordered by inode, stretch by stretch: the due chunks, then the rest,
// in windows of kInodeWindow chunks when a deadline may cut them, so a time
// slice stays stalest-first to within one window and stats only what it
// may read.
Status CheckChunks(Env& env, store::ChunkSource& source, const store::LocalChunkStore* by_inode,
                   const std::vector<ChunkUse>& uses, const std::vector<ArchiveCrypt>& crypts,
                   const std::vector<uint32_t>& unique, std::vector<uint32_t>& todo, size_t due,
                   const VerifyOptions& options, int64_t stamp, Ledger* ledger, Outcomes* out,
                   VerifyReport* report);

}  // namespace cairn::verify::detail
