// RemoteChunkSource: chunks read from a cairn server (docs/SERVER.md,
// "Batched chunk download"). ReadInto() queues the read; worker threads,
// each with its own keep-alive TLS connection, take what is queued in
// batches and fetch each batch with one request, decrypting every chunk
// straight into the buffer of the read it answers (the pipeline's: no copy
// through a parser; docs/ARCHITECTURE.md, "The data plane").
//
// Connections follow the reads in flight that the pipeline's adaptive
// controller picks: a connection is put to work for every kReadsPerConnection
// reads waiting (at least one, at most `max_connections`), so the controller,
// which tunes reads in flight on measured throughput, decides both; a
// connection beyond what the reads need stays open and idle. Batches are
// shared among the connections at work. Connections() reports how many were
// at work (last, most, time-weighted mean).
//
// A batch that fails in transport is retried for the chunks not yet
// received (3 times with backoff, and on for as long as the client's
// reconnect window lasts: RemoteClient::SetReconnectWindow); what the server
// sends is never retried: a corrupt chunk is the pipeline's to find. A
// chunk the server says it has not ("no chunk": a server that restarted has
// forgotten the reader's grants) is asked again once, after the client
// re-established its read session (RemoteClient::RestoreSession).
//
// Thread safety: as store::ChunkSource. The destructor waits for the
// workers; pending reads then fail with Cancelled.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "remote/connection_meter.h"
#include "remote/remote_client.h"
#include "store/chunk_source.h"

namespace cairn::remote {

class RemoteChunkSource : public store::ChunkSource {
 public:
  // Reads waiting per connection at work.
  static constexpr int kReadsPerConnection = 8;
  static constexpr int kDefaultMaxConnections = 8;

  explicit RemoteChunkSource(std::shared_ptr<RemoteClient> client,
                             int max_connections = kDefaultMaxConnections);
  ~RemoteChunkSource() override;

  // All go through the batching queue: what the pipeline asks at once
  // (ReadIntoAsync, issued from its one I/O thread; ReadInto from a
  // caller's thread) becomes one batch. `done` runs on a worker thread.
  Result<Bytes> Read(const store::ChunkId& id) override;
  Status ReadInto(const store::ChunkId& id, ReadBuffer* out) override;
  void ReadAsync(const store::ChunkId& id, store::ReadCallback done) override;
  void ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                     std::function<void(Status)> done) override;
  bool ReadsAsync() const override { return true; }
  store::SourceTraits Traits() const override;
  bool InjectRequestLatency(int64_t latency_us, int64_t jitter_us) override;
  store::ConnectionSummary Connections() const override;

  struct Stats {
    uint64_t batches = 0;
    uint64_t chunks = 0;
    uint64_t retries = 0;
    int connections = 0;  // worker threads (each one connection) started
  };
  Stats stats() const;

 private:
  struct Pending {
    store::ChunkId id;
    // The chunk lands in *out (ReadInto's buffer, or own for Read and
    // ReadAsync), then done says how it went.
    ReadBuffer* out = nullptr;
    std::unique_ptr<ReadBuffer> own;
    std::function<void(Status, ReadBuffer*)> done;
    int attempts = 0;                                 // failed in transport
    std::chrono::steady_clock::time_point failed_at;  // the first of those
    bool refused = false;    // the server said "no chunk": re-grant and ask again
    bool regranted = false;  // asked again after a re-grant: "no chunk" stands
    Status regrant_error;    // the re-grant failed: why the read fails
  };
  void Enqueue(Pending pending);
  void Worker();
  // Connections that should be at work for the reads outstanding.
  // REQUIRES: mu_ held.
  int TargetConnections() const;
  // Fetches `batch` on *connection (opened when null; dropped after a
  // transport error); what is left unanswered stays in it.
  Status FetchBatch(std::unique_ptr<net::HttpConnection>* connection,
                    std::vector<Pending>* batch);
  void SleepForLatency();

  std::shared_ptr<RemoteClient> client_;
  const int max_connections_;
  int64_t latency_us_ = 0;  // injected per request (benchmarks)
  int64_t jitter_us_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::vector<std::thread> workers_;
  int idle_workers_ = 0;
  ConnectionMeter active_;   // workers fetching a batch, over time
  size_t in_batches_ = 0;    // reads taken into batches, not yet answered
  bool stop_ = false;
  Stats stats_;
  int last_active_ = 0;  // the target when the last batch started
};

}  // namespace cairn::remote
