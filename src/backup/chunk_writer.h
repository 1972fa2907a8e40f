// ChunkWriter: the one "store chunk" step of every backup flow (image and
// tree backup): for each chunk of plaintext a CPU worker hands it,
//
//   zero check   an all-zero chunk's id is known up front (cached by length);
//   id           otherwise SHA-256, keyed in encrypted snapshots (blob::ChunkId);
//   claim        the first worker to meet an id in this run stores it, so a
//                chunk repeated within the run is stored and counted once;
//   base lookup  ids of the dedup base (the previous snapshot's archive) are
//                never stored again, not even checked;
//   existence    one question to the store (a stat, or one to the server);
//   encode       compress (+ encrypt) into a per-thread buffer;
//   insert       ChunkSink::InsertAbsent: the store does not ask again;
//   stats        chunks, new and reused chunks and bytes.
//
// Each step is timed into the run's stage meter (pipeline/stage_meter.h):
// zero check and id as hash, existence as metadata, encode as compress,
// insert as target writes.
//
// The server's upload handler (server/chunk_upload.cc) receives chunks
// already encoded and proves them before storing, so it shares only the
// last step (InsertAbsent after its own existence check); sync
// (sync/sync.cc) copies encoded chunks and does not use this yet.
//
// Thread safety: Store() from any number of threads; stats() once they are
// done.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "base/bytes.h"
#include "base/mutex.h"
#include "base/status.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "pipeline/stage_meter.h"
#include "store/chunk_source.h"

namespace cairn::backup {

using DigestSet = std::unordered_set<crypto::Digest, crypto::DigestHash>;

struct ChunkWriterStats {
  uint64_t chunks = 0;
  uint64_t zero_chunks = 0;
  uint64_t new_chunks = 0;     // stored by this run
  uint64_t new_bytes = 0;      // plaintext bytes of the new chunks
  uint64_t stored_bytes = 0;   // encoded bytes written for them
  uint64_t reused_chunks = 0;  // already in the base or the store, or earlier in this run
  uint64_t reused_bytes = 0;
};

class ChunkWriter {
 public:
  struct Options {
    const crypto::CryptConfig* crypt = nullptr;  // encrypt and key ids (null: plain)
    const DigestSet* known = nullptr;            // the dedup base's ids (optional)
    pipeline::StageMeter* meter = nullptr;       // optional
    // The usual chunk length (an image's chunk size): its zero id is
    // computed up front; other lengths are computed once and cached.
    uint32_t usual_length = 0;
  };

  // REQUIRES: `sink` and what `options` points to outlive the writer.
  ChunkWriter(store::ChunkSink& sink, const Options& options);

  // Stores `data` as a chunk unless it is known, claimed earlier in this
  // run, or already in the store; returns its id either way.
  Result<crypto::Digest> Store(ByteSpan data);

  ChunkWriterStats stats() const;

 private:
  crypto::Digest Id(ByteSpan data, bool* zero);
  crypto::Digest ZeroId(size_t length);
  bool Claim(const crypto::Digest& id);
  void CountReused(size_t bytes);

  store::ChunkSink& sink_;
  const Options options_;
  const crypto::Digest usual_zero_;
  Mutex mu_;
  DigestSet claimed_ GUARDED_BY(mu_);
  std::unordered_map<size_t, crypto::Digest> zero_ids_ GUARDED_BY(mu_);
  std::atomic<uint64_t> chunks_{0}, zero_chunks_{0}, new_chunks_{0}, new_bytes_{0},
      stored_bytes_{0}, reused_chunks_{0}, reused_bytes_{0};
};

}  // namespace cairn::backup
