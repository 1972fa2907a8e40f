#include "server/read_grants.h"

#include <fmt/format.h>

#include <algorithm>

namespace cairn::server {

void ReadGrants::ExpireLocked(std::chrono::steady_clock::time_point now) {
  if (now - last_expiry_ < std::min<std::chrono::steady_clock::duration>(std::chrono::seconds(1), idle_)) {
    return;
  }
  last_expiry_ = now;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (now - it->second.last_used >= idle_) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

Status ReadGrants::Grant(const std::string& token, const std::string& store,
                         const std::string& index_key, std::span<const crypto::Digest> digests) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  ExpireLocked(now);
  Entry& e = entries_[{token, store}];
  e.last_used = now;
  if (e.indexes.contains(index_key)) return Status::Ok();
  if (e.chunks.size() + digests.size() > max_chunks_) {
    // Counted before inserting: an index is granted whole or not at all.
    size_t fresh = 0;
    for (const crypto::Digest& d : digests) fresh += e.chunks.contains(d) ? 0 : 1;
    if (e.chunks.size() + fresh > max_chunks_) {
      return ResourceExhaustedError(
          fmt::format("token '{}' may hold at most {} chunks of indexes it read in datastore '{}' "
                      "(limits.max_reader_chunks); this index lists {} more",
                      token, max_chunks_, store, fresh));
    }
  }
  e.chunks.insert(digests.begin(), digests.end());
  e.indexes.insert(index_key);
  return Status::Ok();
}

bool ReadGrants::MayRead(const std::string& token, const std::string& store,
                         const crypto::Digest& id) {
  const auto now = std::chrono::steady_clock::now();
  MutexLock lock(mu_);
  auto it = entries_.find({token, store});
  if (it == entries_.end()) return false;
  it->second.last_used = now;
  return it->second.chunks.contains(id);
}

bool ReadGrants::Granted(const std::string& token, const std::string& store,
                         const std::string& index_key) {
  MutexLock lock(mu_);
  auto it = entries_.find({token, store});
  return it != entries_.end() && it->second.indexes.contains(index_key);
}

size_t ReadGrants::chunks(const std::string& token, const std::string& store) {
  MutexLock lock(mu_);
  auto it = entries_.find({token, store});
  return it == entries_.end() ? 0 : it->second.chunks.size();
}

}  // namespace cairn::server
