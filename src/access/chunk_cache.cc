#include "access/chunk_cache.h"

#include <utility>

#include "restore/chunk_read.h"

namespace cairn::access {

struct ChunkCache::Flight {
  std::condition_variable cv;  // waits on the cache's mu_
  bool done = false;           // GUARDED_BY(mu_)
  bool abandoned = false;      // GUARDED_BY(mu_): joiners load it themselves
  Status status;               // GUARDED_BY(mu_)
  ChunkRef chunk;              // GUARDED_BY(mu_)
};

Result<DecodedChunk> LoadChunk(store::ChunkSource& source, const crypto::Digest& id,
                               uint32_t length, const crypto::CryptConfig* crypt) {
  DecodedChunk out;
  ReadBuffer stored;
  CAIRN_RETURN_IF_ERROR(restore::ReadStoredChunk(source, id, &stored));
  ReadBuffer scratch;
  CAIRN_ASSIGN_OR_RETURN(ByteSpan plain,
                         restore::DecodeCheckedChunk(stored, id, length, &scratch, crypt));
  // The view lies in whichever buffer the decoder left it: keep that one.
  out.buffer = plain.data() == scratch.data() ? std::move(scratch) : std::move(stored);
  out.data = plain;  // a moved ReadBuffer keeps its memory
  return out;
}

ChunkCache::ChunkCache(Options options) : options_(options) {}
ChunkCache::~ChunkCache() = default;

Result<ChunkRef> ChunkCache::Get(const crypto::Digest& id, const Loader& load) {
  std::shared_ptr<Flight> flight;
  {
    std::unique_lock lock(mu_);
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
      joined->cv.wait(lock, [&] { return joined->done; });
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
  std::lock_guard lock(mu_);
  if (!status.ok()) return status;
  return flight->chunk;
}

std::optional<ChunkCache::Claim> ChunkCache::TryClaim(const crypto::Digest& id) {
  std::lock_guard lock(mu_);
  if (bad_.count(id) != 0 || entries_.count(id) != 0) return std::nullopt;
  auto flight = std::make_shared<Flight>();
  entries_.emplace(id, Entry{flight, nullptr, 0, {}});
  ++stats_.claims;
  return Claim(this, id, std::move(flight));
}

void ChunkCache::Finish(const crypto::Digest& id, const std::shared_ptr<Flight>& flight,
                        Result<DecodedChunk> loaded, bool abandoned) {
  ChunkRef chunk;
  if (loaded.ok()) chunk = std::make_shared<const DecodedChunk>(std::move(loaded).value());
  bool report = false;
  Status status = loaded.status();
  {
    std::lock_guard lock(mu_);
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
  flight->cv.notify_all();
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
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.chunk != nullptr;
}

ChunkCacheStats ChunkCache::stats() const {
  std::lock_guard lock(mu_);
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
