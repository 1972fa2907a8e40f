#include "access/chunk_cache.h"

#include <utility>

#include "chunkio/chunk_read.h"

namespace cairn::access {

struct ChunkCache::Flight {
  // The fields are guarded by the cache's mu_, which the analysis cannot
  // name from here (it would take it for a mutex of the Flight).
  CondVar cv;  // waits on the cache's mu_
  bool done = false;
  bool abandoned = false;  // joiners load it themselves
  Status status;
  ChunkRef chunk;
};

namespace {

// Buffers kept for reuse: a few chunks' worth, beside the cache.
constexpr size_t kPooledBuffers = 8;

}  // namespace

ReadBuffer ChunkBufferPool::Take(size_t want) {
  MutexLock lock(mu_);
  if (free_.empty()) return ReadBuffer();
  size_t pick = 0;
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i].capacity() >= want) {
      pick = i;
      break;
    }
    if (free_[i].capacity() > free_[pick].capacity()) pick = i;
  }
  ReadBuffer b = std::move(free_[pick]);
  free_[pick] = std::move(free_.back());
  free_.pop_back();
  return b;
}

void ChunkBufferPool::Give(ReadBuffer buffer) {
  if (buffer.capacity() == 0) return;
  buffer.Clear();
  MutexLock lock(mu_);
  if (free_.size() < max_) free_.push_back(std::move(buffer));
}

Result<DecodedChunk> LoadChunk(store::ChunkSource& source, const crypto::Digest& id,
                               uint32_t length, const crypto::CryptConfig* crypt,
                               ChunkBufferPool* pool) {
  DecodedChunk out;
  ReadBuffer stored = pool != nullptr ? pool->Take(length) : ReadBuffer();
  ReadBuffer scratch = pool != nullptr ? pool->Take(length) : ReadBuffer();
  auto give_back = [&](ReadBuffer& b) {
    if (pool != nullptr) pool->Give(std::move(b));
  };
  Status read = chunkio::ReadStoredChunk(source, id, &stored);
  if (!read.ok()) {
    give_back(stored);
    give_back(scratch);
    return read;
  }
  auto plain = chunkio::DecodeCheckedChunk(stored, id, length, &scratch, crypt);
  if (!plain.ok()) {
    give_back(stored);
    give_back(scratch);
    return plain.status();
  }
  // The view lies in whichever buffer the decoder left it: keep that one.
  if (plain->data() == scratch.data()) {
    out.buffer = std::move(scratch);
    give_back(stored);
  } else {
    out.buffer = std::move(stored);
    give_back(scratch);
  }
  out.data = *plain;  // a moved ReadBuffer keeps its memory
  return out;
}

ChunkCache::ChunkCache(Options options)
    : options_(options), pool_(std::make_shared<ChunkBufferPool>(kPooledBuffers)) {}
ChunkCache::~ChunkCache() = default;

Result<ChunkRef> ChunkCache::Get(const crypto::Digest& id, const Loader& load) {
  std::shared_ptr<Flight> flight;
  {
    MutexLock lock(mu_);
    while (true) {
      if (auto bad = bad_.find(id); bad != bad_.end()) {
        ++stats_.known_bad_hits;
        return bad->second;
      }
      auto it = entries_.find(id);
      if (it == entries_.end()) break;
      Entry& e = it->second;
      if (e.chunk) {
        lru_.splice(lru_.begin(), lru_, e.lru);
        ++stats_.hits;
        return e.chunk;
      }
      std::shared_ptr<Flight> joined = e.flight;
      ++stats_.joins;
      while (!joined->done) joined->cv.Wait(mu_);
      if (joined->abandoned) continue;  // look again: load it ourselves
      if (!joined->status.ok()) return joined->status;
      return joined->chunk;
    }
    ++stats_.misses;
    flight = std::make_shared<Flight>();
    entries_.emplace(id, Entry{flight, nullptr, 0, {}});
  }
  Result<DecodedChunk> loaded = load();
  Status status = loaded.status();
  Finish(id, flight, std::move(loaded), /*abandoned=*/false);
  MutexLock lock(mu_);
  if (!status.ok()) return status;
  return flight->chunk;
}

std::optional<ChunkCache::Claim> ChunkCache::TryClaim(const crypto::Digest& id) {
  MutexLock lock(mu_);
  if (bad_.count(id) != 0 || entries_.count(id) != 0) return std::nullopt;
  auto flight = std::make_shared<Flight>();
  entries_.emplace(id, Entry{flight, nullptr, 0, {}});
  ++stats_.claims;
  return Claim(this, id, std::move(flight));
}

void ChunkCache::Finish(const crypto::Digest& id, const std::shared_ptr<Flight>& flight,
                        Result<DecodedChunk> loaded, bool abandoned) {
  ChunkRef chunk;
  if (loaded.ok()) {
    // The last holder gives the buffer back to the pool.
    chunk = ChunkRef(new DecodedChunk(std::move(loaded).value()),
                     [pool = pool_](const DecodedChunk* c) {
                       pool->Give(std::move(const_cast<DecodedChunk*>(c)->buffer));
                       delete c;
                     });
  }
  bool report = false;
  Status status = loaded.status();
  {
    MutexLock lock(mu_);
    auto it = entries_.find(id);
    // The entry is this flight's: nothing else replaces an entry in flight.
    if (chunk) {
      Entry& e = it->second;
      e.flight.reset();
      e.chunk = chunk;
      e.charge = chunk->data.size();
      lru_.push_front(id);
      e.lru = lru_.begin();
      stats_.bytes += e.charge;
      ++stats_.entries;
      ++stats_.loads;
      stats_.loaded_bytes += e.charge;
      EvictLocked();
      stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
    } else {
      entries_.erase(it);
      if (!abandoned) {
        ++stats_.failures;
        if (status.code() == StatusCode::kDataLoss) report = bad_.emplace(id, status).second;
      }
    }
    flight->done = true;
    flight->abandoned = abandoned;
    flight->status = status;
    flight->chunk = chunk;
  }
  flight->cv.NotifyAll();
  if (report && options_.logger != nullptr) {
    options_.logger->Error("{} (reads that need it fail with EIO)", status.message());
  }
}

void ChunkCache::EvictLocked() {
  // The newest entry (at the front) stays even when it alone is too big.
  while (stats_.bytes > options_.capacity_bytes && lru_.size() > 1) {
    const crypto::Digest victim = lru_.back();
    lru_.pop_back();
    auto it = entries_.find(victim);
    stats_.bytes -= it->second.charge;
    --stats_.entries;
    ++stats_.evictions;
    entries_.erase(it);  // a reader holding the chunk keeps it alive
  }
}

bool ChunkCache::Contains(const crypto::Digest& id) const {
  MutexLock lock(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.chunk != nullptr;
}

ChunkCacheStats ChunkCache::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

ChunkCache::Claim::Claim(ChunkCache* cache, const crypto::Digest& id,
                         std::shared_ptr<Flight> flight)
    : cache_(cache), id_(id), flight_(std::move(flight)) {}

ChunkCache::Claim::Claim(Claim&& other) noexcept
    : cache_(std::exchange(other.cache_, nullptr)), id_(other.id_),
      flight_(std::move(other.flight_)) {}

ChunkCache::Claim& ChunkCache::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Abandon();
    cache_ = std::exchange(other.cache_, nullptr);
    id_ = other.id_;
    flight_ = std::move(other.flight_);
  }
  return *this;
}

ChunkCache::Claim::~Claim() { Abandon(); }

void ChunkCache::Claim::Fulfil(Result<DecodedChunk> loaded) {
  if (cache_ == nullptr) return;
  std::exchange(cache_, nullptr)->Finish(id_, flight_, std::move(loaded), false);
}

void ChunkCache::Claim::Abandon() {
  if (cache_ == nullptr) return;
  std::exchange(cache_, nullptr)
      ->Finish(id_, flight_, CancelledError("readahead abandoned"), /*abandoned=*/true);
}

}  // namespace cairn::access
