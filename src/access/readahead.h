// Readahead: finds sequential reads of a stream and fetches the chunks
// ahead of them into the ChunkCache on the fetch pipeline
// (pipeline/fetch_pipeline.h), with reads in flight tuned by the adaptive
// concurrency controller, so `cp` from a mount or `nbdcopy` of an export
// stream at restore speed. Random reads fetch only what they touch.
//
// Detection. Up to max_streams streams are tracked (nbdcopy reads several
// distant regions at once, one per connection). A read continues a stream
// when it starts within 256 KiB of where the stream's reads reached, or,
// once the stream is sequential, within its window (at most kSlack:
// requests in flight arrive slightly out of order); any other read starts
// a new stream in the least recently used slot. A stream read twice is
// sequential: from then on the bytes ahead of it, up to its window, are
// queued for fetching, and more are queued each time less than half a
// window is left ahead; the window starts at kInitialWindow and doubles
// up to max_window_bytes (as the kernel's readahead grows). A random
// reader, whose reads rarely land next to each other, starts none.
//
// Fetching. One thread, started at the first queued chunk, runs the fetch
// pipeline over the queue, chunks reaching the running pipeline as they are
// queued (pipeline::ItemFeed): each chunk is claimed in the cache
// (ChunkCache::TryClaim; one cached or being loaded is skipped), read on the
// I/O stage and decoded and checked on the CPU stage. A failure is handed
// to the claim (the cache remembers and reports a bad chunk), never to the
// pipeline, so one bad chunk does not stop the others. A run ends after two
// seconds with nothing queued (its threads with it: starting a set of
// threads per batch cost `cp -a` of a tree more than the decoding); the
// controller keeps what it learnt across runs.
//
// Memory: at most max_window_bytes ahead of each stream, all of it in the
// cache (which bounds it again), plus the pipeline's reads in flight.
//
// Thread safety: OnRead may be called concurrently; the destructor stops
// the thread (chunks being fetched are finished first). Lock order: the
// pipeline's admission lock, then mu_ (never mu_, then a feed or the
// pipeline).
#pragma once

#include <atomic>
#include <memory>
#include <condition_variable>
#include <cstdint>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "access/chunk_cache.h"
#include "access/chunk_map.h"
#include "base/mutex.h"
#include "pipeline/concurrency_controller.h"
#include "pipeline/fetch_pipeline.h"

namespace cairn::access {

struct ReadaheadOptions {
  bool enabled = true;
  uint64_t max_window_bytes = uint64_t{64} << 20;  // per stream
  int max_streams = 8;
  int jobs = 0;         // reads in flight: 0 = adaptive, N = pinned
  int cpu_workers = 0;  // decoding threads; 0: one per core
};

struct ReadaheadStats {
  uint64_t streams = 0;          // sequential streams found
  uint64_t queued_chunks = 0;    // chunks queued for fetching
  uint64_t fetched_chunks = 0;   // chunks this readahead loaded into the cache
  uint64_t fetched_bytes = 0;    // their plaintext bytes
  uint64_t skipped_chunks = 0;   // queued, but cached or loading by then
  uint64_t runs = 0;             // fetch pipeline runs
  int jobs_final = 0;            // the controller's limit now
};

class Readahead {
 public:
  static constexpr uint64_t kSlack = uint64_t{8} << 20;
  static constexpr uint64_t kInitialWindow = uint64_t{8} << 20;

  // REQUIRES: map, cache, source (and crypt) outlive the readahead.
  Readahead(const ChunkMap& map, ChunkCache& cache, store::ChunkSource& source,
            const crypto::CryptConfig* crypt, std::string description,
            const ReadaheadOptions& options);
  ~Readahead();
  Readahead(const Readahead&) = delete;
  Readahead& operator=(const Readahead&) = delete;

  // A read of stream bytes [offset, offset + length) is about to happen.
  void OnRead(uint64_t offset, uint64_t length);

  ReadaheadStats stats() const;

 private:
  struct Stream {
    uint64_t end = 0;    // where its reads reached
    uint64_t ahead = 0;  // bytes before this are queued (or were read)
    uint64_t window = 0;
    uint64_t last_use = 0;
    int reads = 0;
  };

  // The detection for one read; the number of chunks it queued.
  size_t DetectLocked(uint64_t offset, uint64_t length) REQUIRES(mu_);
  // Queues the chunks of [from, to) that need fetching; how many.
  size_t QueueLocked(uint64_t from, uint64_t to) REQUIRES(mu_);
  void Run(std::stop_token stop);
  void RunPipeline(pipeline::ItemFeed& feed);
  Result<DecodedChunk> Decode(size_t pos, ReadBuffer& stored);
  Status ContextFor(size_t pos, const Status& s) const;

  const ChunkMap& map_;
  ChunkCache& cache_;
  store::ChunkSource& source_;
  const crypto::CryptConfig* crypt_;
  const std::string description_;
  const ReadaheadOptions options_;
  pipeline::ConcurrencyController controller_;

  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::vector<Stream> streams_ GUARDED_BY(mu_);
  uint64_t clock_ GUARDED_BY(mu_) = 0;
  std::vector<size_t> queue_ GUARDED_BY(mu_);  // chunk positions; item k of a run
  std::shared_ptr<pipeline::ItemFeed> feed_ GUARDED_BY(mu_);  // the running pipeline's
  std::unordered_map<size_t, ChunkCache::Claim> claims_ GUARDED_BY(mu_);  // by run item
  ReadaheadStats stats_ GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};
  std::jthread thread_;  // started with the first queued chunk; last member
};

}  // namespace cairn::access
