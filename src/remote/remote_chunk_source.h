// RemoteChunkSource: chunks read from a cairn server (docs/SERVER.md,
// "Batched chunk download"). ReadAsync() queues; up to `max_connections`
// worker threads, each with its own keep-alive TLS connection, take what is
// queued in batches and stream the chunks back with one request per batch,
// calling each read's callback as its frame arrives. So the number of reads
// in flight that the pipeline's adaptive controller picks sets both the
// batch sizes and how many connections work at once: no transfer waits on
// one connection (PBS's restore runs on a single HTTP/2 connection).
//
// A batch that fails in transport is retried for the chunks not yet
// received (up to 3 times, with backoff); what the server sends is never
// retried: a corrupt chunk is the pipeline's to find.
//
// Thread safety: as store::ChunkSource. The destructor waits for the
// workers; pending reads then fail with Cancelled.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "remote/remote_client.h"
#include "store/chunk_source.h"

namespace cairn::remote {

class RemoteChunkSource : public store::ChunkSource {
 public:
  explicit RemoteChunkSource(std::shared_ptr<RemoteClient> client, int max_connections = 8);
  ~RemoteChunkSource() override;

  // Both go through the batching queue too: the pipelines' I/O threads
  // call ReadInto, and what they ask at once becomes one batch.
  Result<Bytes> Read(const store::ChunkId& id) override;
  Status ReadInto(const store::ChunkId& id, ReadBuffer* out) override;
  void ReadAsync(const store::ChunkId& id, store::ReadCallback done) override;
  store::SourceTraits Traits() const override;

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
    store::ReadCallback done;  // ReadAsync: the bytes, or why not
    // ReadInto: the chunk lands in *out (its capacity reused, no copy),
    // then done_into says how it went.
    Bytes* out = nullptr;
    std::function<void(Status)> done_into;
    int attempts = 0;

    void Finish(Result<Bytes> r) {
      if (done) return done(std::move(r));
      if (r.ok()) *out = std::move(*r);
      done_into(r.status());
    }
  };
  // Read and ReadInto: through the queue into *out.
  Status ReadIntoBytes(const store::ChunkId& id, Bytes* out);
  void Enqueue(Pending pending);
  void Worker();
  // Fetches `batch`; what is left unanswered stays in it.
  Status FetchBatch(std::vector<Pending>* batch);

  std::shared_ptr<RemoteClient> client_;
  const int max_connections_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  std::vector<std::thread> workers_;
  int idle_workers_ = 0;
  bool stop_ = false;
  Stats stats_;
};

}  // namespace cairn::remote
