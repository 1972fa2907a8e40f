// A chunk source in memory for the access module's tests: encodes chunks
// as a store would, counts reads per id, can delay reads, hold them until
// released, fail them, or flip a bit in one id's stored bytes.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "blob/blob.h"
#include "store/chunk_source.h"
#include "tests/unit_test_util.h"

namespace cairn::access {

class TestSource final : public store::ChunkSource {
 public:
  // Stores `plain` as a chunk (compressed when `compress`); returns its id.
  crypto::Digest Add(ByteSpan plain, bool compress = true,
                     const crypto::CryptConfig* crypt = nullptr) {
    crypto::Digest id = blob::ChunkId(plain, crypt);
    blob::EncodeOptions o;
    o.compress = compress;
    o.crypt = crypt;
    std::lock_guard lock(mu_);
    blobs_[id] = blob::Encode(plain, o).value();
    return id;
  }

  Result<Bytes> Read(const store::ChunkId& id) override {
    std::unique_lock lock(mu_);
    ++reads_[id];
    ++in_flight_;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    cv_.wait(lock, [&] { return !held_; });
    lock.unlock();
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    lock.lock();
    --in_flight_;
    if (failing_.count(id) != 0) return UnavailableError("test source: read failed");
    auto it = blobs_.find(id);
    if (it == blobs_.end()) return NotFoundError("test source: no chunk " + crypto::DigestHex(id));
    Bytes out = it->second;
    if (corrupt_.count(id) != 0) out.back() ^= 0x01;
    return out;
  }
  // Made asynchronous (SetAsync), each ReadIntoAsync completes on a thread
  // of its own, as an object store's reads complete on its client's thread.
  void SetAsync() { async_ = true; }
  bool ReadsAsync() const override { return async_; }
  void ReadIntoAsync(const store::ChunkId& id, ReadBuffer* out,
                     std::function<void(Status)> done) override {
    threads_.Run([this, id, out, done = std::move(done)] { done(ReadInto(id, out)); });
  }

  store::SourceTraits Traits() const override {
    store::SourceTraits t;
    t.medium = store::MediumKind::kMemory;
    t.initial_reads_in_flight = 2;
    t.max_reads_in_flight = 8;
    t.description = "test source";
    return t;
  }

  int ReadsOf(const crypto::Digest& id) const {
    std::lock_guard lock(mu_);
    auto it = reads_.find(id);
    return it == reads_.end() ? 0 : it->second;
  }
  int TotalReads() const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& [id, count] : reads_) n += count;
    return n;
  }
  int InFlight() const {
    std::lock_guard lock(mu_);
    return in_flight_;
  }
  // While held, reads wait (and count as in flight) until Release().
  void Hold() {
    std::lock_guard lock(mu_);
    held_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      held_ = false;
    }
    cv_.notify_all();
  }
  void SetDelay(std::chrono::microseconds d) { delay_ = d; }
  void Corrupt(const crypto::Digest& id) {
    std::lock_guard lock(mu_);
    corrupt_.insert(id);
  }
  void Fail(const crypto::Digest& id) {
    std::lock_guard lock(mu_);
    failing_.insert(id);
  }
  void Heal(const crypto::Digest& id) {
    std::lock_guard lock(mu_);
    failing_.erase(id);
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<crypto::Digest, Bytes> blobs_;
  std::map<crypto::Digest, int> reads_;
  std::set<crypto::Digest> corrupt_;
  std::set<crypto::Digest> failing_;
  bool held_ = false;
  int in_flight_ = 0;
  int peak_in_flight_ = 0;
  std::chrono::microseconds delay_{0};
  std::atomic<bool> async_{false};
  test_util::ThreadPerRead threads_;  // last: joined before the rest goes
};

}  // namespace cairn::access
