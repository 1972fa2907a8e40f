// The client side of writing to a server: a datastore opened through a
// server (remote_repo.h) gets a RemoteStoreBackend, so `cairn backup -r
// https://…` runs the same backup code as a local one, and only the seam
// differs (docs/SERVER.md, "Backup sessions"):
//
//   - SnapshotWriter::Begin opens a backup session on the server; its
//     target uploads each index and blob file, and Commit sends the manifest
//     (built and, with a key, signed on the client, as locally);
//   - chunks go to a RemoteChunkSink: Insert() adds the chunk to a batch;
//     full batches (4 MiB, or 256 MiB once decoded) are uploaded by up to
//     DefaultMaxConnections() threads (one per core, 4 to 8), each on its own
//     keep-alive connection, while the backup goes
//     on; a thread (a connection) is added while batches wait for one, so
//     the connections follow how fast the backup's pipeline (its reads in
//     flight tuned by the adaptive controller) produces new chunks, and an
//     unchanged backup opens none. Flush() (before the manifest) waits for
//     all and returns the first error. Memory is bounded by the batches in
//     flight (2 per thread). Connections() reports the uploads at work (last,
//     most, time-weighted mean) and the cap.
//
// What is sent: every chunk the backup does not find in its base snapshot
// (the dedup base is the previous snapshot's index, as locally, so a second
// backup of unchanged data uploads nothing). The sink's Contains() answers
// from the chunks this session uploaded only: the server is never asked
// whether it holds a chunk (no probing by digest).
//
// Thread safety: RemoteChunkSink as store::ChunkSink; one backup session per
// backend at a time.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "datastore/snapshot_target.h"
#include "remote/connection_meter.h"
#include "remote/remote_chunk_source.h"
#include "remote/remote_client.h"
#include "store/chunk_source.h"

namespace cairn::remote {

class RemoteChunkSink : public store::ChunkSink {
 public:
  // `max_connections` 0: DefaultMaxConnections().
  explicit RemoteChunkSink(std::shared_ptr<RemoteClient> client, int max_connections = 0);
  // One upload connection per core of this machine, at least 4 and at most
  // 8. A connection carries one batch at a time and the server proves and
  // stores a batch before it answers, so a connection is busy on the
  // server's side only part of the time: with 4 on a 16-core machine a first
  // backup through the server reached 0.60x the local one, whose pipeline
  // kept ~8 cores busy (docs/BENCHMARKS.md, "The remote path when cores are
  // not the limit"); a client with more cores makes chunks faster and needs
  // more uploads at work to keep up.
  static int DefaultMaxConnections();
  ~RemoteChunkSink() override;

  // Uploads go to SESSION_PATH/chunks from now on. Resets the session's
  // state (uploaded set, sticky error).
  void StartSession(std::string session_path);
  // Waits for the uploads in flight and forgets the session.
  void EndSession();

  Result<store::InsertResult> Insert(const store::ChunkId& id, ByteSpan stored) override;
  Result<bool> Contains(const store::ChunkId& id) override;
  Status Flush() override;
  store::ConnectionSummary Connections() const override;

  struct Stats {
    uint64_t batches = 0;
    uint64_t chunks = 0;
    uint64_t bytes = 0;
  };
  Stats stats() const;

 private:
  void Worker();
  // Queues current_ (waiting for room).
  void QueueCurrent() REQUIRES(mu_);

  std::shared_ptr<RemoteClient> client_;
  const int max_connections_;
  mutable Mutex mu_;
  CondVar cv_;       // workers: work queued; producers: room
  CondVar idle_cv_;  // Flush: nothing queued or in flight
  std::string path_ GUARDED_BY(mu_);
  std::unordered_set<store::ChunkId, crypto::DigestHash> uploaded_ GUARDED_BY(mu_);
  Bytes current_ GUARDED_BY(mu_);
  size_t current_chunks_ GUARDED_BY(mu_) = 0;
  uint64_t current_raw_ GUARDED_BY(mu_) = 0;  // what current_'s chunks decode to
  std::deque<Bytes> queue_ GUARDED_BY(mu_);
  std::vector<Bytes> spare_ GUARDED_BY(mu_);  // sent batches' buffers, for the next ones
  ConnectionMeter in_flight_ GUARDED_BY(mu_);  // uploads at work (one connection each), over time
  Status error_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  // Started under mu_; joined by the destructor once no thread adds one.
  std::vector<std::thread> workers_ GUARDED_BY(mu_);
  Stats stats_ GUARDED_BY(mu_);
  int last_in_flight_ GUARDED_BY(mu_) = 0;  // at work when the last upload started
};

class RemoteStoreBackend : public datastore::RemoteBackend {
 public:
  explicit RemoteStoreBackend(std::shared_ptr<RemoteClient> client);

  store::ChunkSource& Source() override { return source_; }
  store::ChunkSink& Sink() override { return sink_; }
  Result<std::unique_ptr<datastore::SnapshotTarget>> BeginSnapshot(
      const datastore::SnapshotRef& snap) override;
  // A repair session for the existing snapshot `snap` (server/
  // backup_session.h): chunks inserted into Sink() while the target lives
  // are uploaded under the server's rules; nothing else of the snapshot
  // changes (WriteFile and Commit are refused). Destroying the target
  // ends the session; Sink().Flush() first reports what the uploads gave.
  Result<std::unique_ptr<datastore::SnapshotTarget>> BeginRepair(
      const datastore::SnapshotRef& snap);

 private:
  Result<std::unique_ptr<datastore::SnapshotTarget>> Begin(const datastore::SnapshotRef& snap,
                                                           bool repair);

  std::shared_ptr<RemoteClient> client_;
  RemoteChunkSource source_;
  RemoteChunkSink sink_;
};

}  // namespace cairn::remote
