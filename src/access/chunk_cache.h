// ChunkCache: the decoded chunks that instant access shares (`cairn mount`,
// `cairn nbd`, `restore --instant`): every archive of a mount and every
// connection of an export read through one cache.
//
//   - A bounded LRU of decoded chunks, charged by plaintext bytes: memory
//     stays within the capacity whatever the image size (plus the chunks
//     readers hold at the moment, at most one per read in progress).
//   - Single flight: concurrent Gets of one id wait for one load; the first
//     caller loads on its own thread, the others join it.
//   - Readahead claims ids (TryClaim) before fetching them on the fetch
//     pipeline's threads, so a demand read of a chunk being prefetched
//     joins that fetch instead of reading the chunk again.
//   - A chunk that fails its checks (DataLoss) is remembered: the failure
//     is reported once (logged), and later Gets of that id fail at once
//     with the same error, without reading it again. Other errors (a
//     server that did not answer) go to that Get and its joiners only.
//
// Chunks are keyed by id alone: an id is the SHA-256 (or keyed HMAC) of the
// plaintext, so two archives or snapshots that share a chunk share its
// cache entry, and chunks of snapshots under different keys never collide.
//
// Thread safety: all methods may be called concurrently from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/logging.h"
#include "base/mutex.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "store/chunk_source.h"

namespace cairn::access {

// A decoded chunk: its plaintext `data`, which lies inside `buffer`.
struct DecodedChunk {
  ReadBuffer buffer;
  ByteSpan data;
};
using ChunkRef = std::shared_ptr<const DecodedChunk>;

// Chunk buffers for reuse: a chunk the cache let go (evicted, and no reader
// holds it any more) gives its buffer back, and loads take theirs from
// here, so steady reading does not map and clear fresh memory for every
// chunk (clearing the pages of fresh buffers was 17 % of `cairn mount`'s
// CPU during `cp -a` before). At most `max_buffers` wait here.
//
// Thread safety: Take and Give may be called concurrently.
class ChunkBufferPool {
 public:
  explicit ChunkBufferPool(size_t max_buffers) : max_(max_buffers) {}
  // A buffer that holds `want` bytes without growing when there is one,
  // else the largest there is, else a new (empty) one.
  ReadBuffer Take(size_t want = 0);
  void Give(ReadBuffer buffer);

 private:
  const size_t max_;
  Mutex mu_;
  std::vector<ReadBuffer> free_ GUARDED_BY(mu_);
};

// Reads the stored bytes of `id` from `source` and decodes and checks them
// (chunkio/chunk_read.h: CRC, decryption with `crypt`, decompression, id,
// `length`), keeping whichever buffer holds the plaintext (no copy).
// Buffers come from `pool` when given, and the one not kept goes back.
Result<DecodedChunk> LoadChunk(store::ChunkSource& source, const crypto::Digest& id,
                               uint32_t length, const crypto::CryptConfig* crypt,
                               ChunkBufferPool* pool = nullptr);

struct ChunkCacheStats {
  uint64_t hits = 0;        // Gets served from memory
  uint64_t misses = 0;      // Gets that loaded the chunk themselves
  uint64_t joins = 0;       // Gets that waited for another's load
  uint64_t claims = 0;      // loads claimed by readahead
  uint64_t loaded_bytes = 0;   // plaintext bytes of successful loads
  uint64_t loads = 0;          // successful loads (Gets and claims)
  uint64_t failures = 0;       // failed loads
  uint64_t known_bad_hits = 0;  // Gets refused at once: the id is known bad
  uint64_t evictions = 0;
  uint64_t bytes = 0;       // plaintext bytes held now
  uint64_t peak_bytes = 0;  // most ever held
  uint64_t entries = 0;     // chunks held now
};

class ChunkCache {
 public:
  static constexpr uint64_t kDefaultCapacity = uint64_t{256} << 20;
  // Below this a cache cannot hold a 16 MiB chunk (blob::kMaxRawSize).
  static constexpr uint64_t kMinCapacity = uint64_t{16} << 20;

  struct Options {
    uint64_t capacity_bytes = kDefaultCapacity;
    // Reports each chunk found bad, once ("cairn: error: …"). May be null.
    // REQUIRES: outlives the cache.
    Logger* logger = nullptr;
  };

  explicit ChunkCache(Options options);
  ~ChunkCache();
  ChunkCache(const ChunkCache&) = delete;
  ChunkCache& operator=(const ChunkCache&) = delete;

  // Loads one chunk (usually LoadChunk with the archive's source and key).
  // Its error messages should say where the chunk is used: the first
  // DataLoss of an id is what gets reported.
  using Loader = std::function<Result<DecodedChunk>()>;

  // The chunk `id`: from memory, by joining a load in progress, or by
  // calling `load` on this thread.
  Result<ChunkRef> Get(const crypto::Digest& id, const Loader& load);

  struct Flight;
  // A load claimed for readahead. Fulfil it exactly once; a Claim destroyed
  // unfulfilled releases the id, and Gets waiting for it load it themselves.
  class Claim {
   public:
    Claim(ChunkCache* cache, const crypto::Digest& id, std::shared_ptr<Flight> flight);
    Claim(Claim&& other) noexcept;
    Claim& operator=(Claim&& other) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim();
    void Fulfil(Result<DecodedChunk> loaded);

   private:
    void Abandon();
    ChunkCache* cache_ = nullptr;
    crypto::Digest id_{};
    std::shared_ptr<Flight> flight_;
  };

  // Claims `id` for a load by the caller; nullopt when it is cached, being
  // loaded or known bad (nothing to do).
  std::optional<Claim> TryClaim(const crypto::Digest& id);

  // True when `id` is held (not merely being loaded).
  bool Contains(const crypto::Digest& id) const;
  uint64_t capacity() const { return options_.capacity_bytes; }
  // Where loads take their buffers (and chunks return them).
  ChunkBufferPool& buffers() { return *pool_; }
  ChunkCacheStats stats() const;

 private:
  struct Entry {
    std::shared_ptr<Flight> flight;  // set while loading
    ChunkRef chunk;                  // set once loaded
    uint64_t charge = 0;
    std::list<crypto::Digest>::iterator lru;  // valid when chunk is set
  };

  // Ends the load of `id` by `flight`: holds the chunk, or drops the entry
  // (remembering a DataLoss); wakes the joiners. `abandoned`: nobody
  // loaded it, joiners retry.
  void Finish(const crypto::Digest& id, const std::shared_ptr<Flight>& flight,
              Result<DecodedChunk> loaded, bool abandoned);
  void EvictLocked() REQUIRES(mu_);

  const Options options_;
  // Shared with the chunks' deleters: a chunk may outlive the cache.
  std::shared_ptr<ChunkBufferPool> pool_;
  mutable Mutex mu_;
  std::unordered_map<crypto::Digest, Entry, crypto::DigestHash> entries_ GUARDED_BY(mu_);
  std::list<crypto::Digest> lru_ GUARDED_BY(mu_);  // most recently used first
  std::unordered_map<crypto::Digest, Status, crypto::DigestHash> bad_ GUARDED_BY(mu_);
  ChunkCacheStats stats_ GUARDED_BY(mu_);
};

}  // namespace cairn::access
