// ChunkSource and ChunkSink: the seam between the flows (backup, restore,
// verify) and where chunks live. The local and the object store implement
// both; a server (remote/: RemoteChunkSource, a backup's RemoteChunkSink)
// and test wrappers (injected latency, faults) one each, and the pipelines
// never know which one they talk to.
//
// A source returns the *stored* bytes (a blob); checking and decoding them
// is the caller's CPU stage, so I/O and CPU work can run on separate stages.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/bytes.h"
#include "base/read_buffer.h"
#include "base/status.h"
#include "crypto/sha256.h"

namespace cairn::store {

using ChunkId = crypto::Digest;

// What a source is, so the concurrency controller can pick a starting point.
enum class MediumKind { kUnknown, kRotational, kFlash, kNetwork, kMemory };

// Where reads in flight start for a source across a network (a cairn
// server; a local store behind --inject-latency, which stands in for one):
// a round trip of milliseconds needs many reads in flight, and slow start
// from 2 spends the first few hundred milliseconds finding that out.
inline constexpr int kNetworkInitialReads = 16;

struct SourceTraits {
  MediumKind medium = MediumKind::kUnknown;
  // A reasonable starting number of reads in flight for this medium.
  int initial_reads_in_flight = 4;
  std::string description;  // "local store /srv/store", for logs
  // The most reads in flight worth trying (the adaptive controller's
  // ceiling): object stores serve best with 32–128.
  int max_reads_in_flight = 64;
};

using ReadCallback = std::function<void(Result<Bytes>)>;

// How many connections a source that talks to a server kept at work: the
// last, the most, and the time-weighted mean over the run.
struct ConnectionSummary {
  int final_count = 0;
  int max_count = 0;
  double mean_count = 0;
  int cap = 0;  // the most it may open
};

// Thread safety: all methods may be called concurrently from any thread.
class ChunkSource {
 public:
  virtual ~ChunkSource() = default;

  // Reads the stored bytes of `id`. NotFound when the chunk is absent,
  // DataLoss when it cannot be read back, Unavailable when worth retrying.
  // Errors name the chunk and the source.
  virtual Result<Bytes> Read(const ChunkId& id) = 0;

  // As Read(), into `out`, reusing its capacity (the pipelines recycle
  // chunk buffers this way). On error `out`'s content is unspecified.
  virtual Status ReadInto(const ChunkId& id, ReadBuffer* out) {
    CAIRN_ASSIGN_OR_RETURN(Bytes data, Read(id));
    out->Adopt(std::move(data));
    return Status::Ok();
  }

  // Starts reading `id`; `done` runs exactly once, possibly on this thread
  // before ReadAsync returns (the default does exactly that), with the
  // bytes or a Status as from Read(). `done` must not block.
  // REQUIRES: the source outlives every pending read.
  virtual void ReadAsync(const ChunkId& id, ReadCallback done) { done(Read(id)); }

  // As ReadInto(), without waiting: `done` runs exactly once with how it
  // went, possibly on this thread before ReadIntoAsync returns (the default
  // reads here, blocking), or on the source's own thread. `*out` is the
  // source's until `done` runs. `done` must not block.
  // REQUIRES: the source outlives every pending read.
  virtual void ReadIntoAsync(const ChunkId& id, ReadBuffer* out, std::function<void(Status)> done) {
    done(ReadInto(id, out));
  }

  // True when ReadIntoAsync returns without waiting for the read (an object
  // store's GET on its client's event loop): the fetch pipeline then keeps
  // its reads in flight as pending callbacks issued from one thread, not as
  // one parked thread each. False for sources whose reads block a thread (a
  // local store, where a pool of threads doing blocking reads is right),
  // and for wrappers that add blocking work to a read (InjectingSource).
  virtual bool ReadsAsync() const { return false; }

  virtual SourceTraits Traits() const = 0;

  // A source whose reads travel in requests over a network (a cairn server)
  // adds `latency_us` (plus uniform jitter below `jitter_us`) before each
  // request it sends, as a round trip would, and returns true; a wrapper
  // that injects latency (InjectingSource) then adds none per read. For
  // tests and benchmarks only.
  virtual bool InjectRequestLatency(int64_t latency_us, int64_t jitter_us) {
    (void)latency_us;
    (void)jitter_us;
    return false;
  }

  // For a source that talks to a server over several connections: how many
  // it used. Zero counts for any other source.
  virtual ConnectionSummary Connections() const { return {}; }
};

struct InsertResult {
  bool inserted = false;  // false: an identical chunk was already stored
  uint64_t stored_bytes = 0;
};

// Thread safety: all methods may be called concurrently from any thread.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;

  // Stores the encoded blob `stored` under `id`, atomically: readers see the
  // whole chunk or none. An existing chunk with this id is left as it is,
  // even one that appears while this insert runs (never replaced).
  virtual Result<InsertResult> Insert(const ChunkId& id, ByteSpan stored) = 0;

  // As Insert(), for a caller that has just asked Contains(id) and was told
  // no: a sink that would ask itself first (the local store's stat and
  // access-time touch) does not ask again. A chunk that appears meanwhile
  // is still never replaced (inserted = false).
  virtual Result<InsertResult> InsertAbsent(const ChunkId& id, ByteSpan stored) {
    return Insert(id, stored);
  }

  // Stores `stored` under `id` whatever is there, atomically. For a caller
  // that has checked `stored` against `id` (decoded and hashed it) and must
  // not keep an unproven or damaged copy over it: the server, when a
  // verified upload meets a stored chunk that is not a valid copy
  // (docs/SERVER.md, "Backup sessions"). Unimplemented by sinks that cannot.
  virtual Result<InsertResult> Replace(const ChunkId& id, ByteSpan stored) {
    (void)id;
    (void)stored;
    return UnimplementedError("this chunk store cannot replace a chunk");
  }

  // True when a chunk with this id is stored (without reading it).
  virtual Result<bool> Contains(const ChunkId& id) = 0;

  // Makes every chunk inserted so far durable. Called before a manifest
  // that references them is written.
  virtual Status Flush() = 0;

  // For a sink that uploads to a server over several connections: how many
  // it used. Zero counts for any other sink.
  virtual ConnectionSummary Connections() const { return {}; }
};

}  // namespace cairn::store
