// What a reader may download (docs/SERVER.md, "Reader tokens and chunks"):
// as in PBS, a reader or verify token may download a chunk only when it
// is listed in an index the token read, through GET …/file or POST
// …/grant (for an index the client had cached). Downloading a chunk is
// then one hash-set lookup; nobody can fetch a chunk, or learn that it
// exists, by its digest alone.
//
// A token's grants live while it uses them: they are forgotten after
// `idle` without a grant or a download, and at most `max_chunks` digests
// are held per token and datastore (Grant fails past that; the client
// sees why).
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "base/mutex.h"
#include "base/status.h"
#include "crypto/sha256.h"
#include "server/digest_set.h"

namespace cairn::server {

class ReadGrants {
 public:
  ReadGrants(size_t max_chunks, std::chrono::seconds idle) : max_chunks_(max_chunks), idle_(idle) {}

  // Grants `token` the chunks `digests` of index `index_key` (a name for
  // the index, so that registering it again costs nothing) in `store`.
  // ResourceExhausted past max_chunks.
  Status Grant(const std::string& token, const std::string& store, const std::string& index_key,
               std::span<const crypto::Digest> digests);
  // True when `token` read an index of `store` that lists `id`.
  bool MayRead(const std::string& token, const std::string& store, const crypto::Digest& id);
  // Whether `index_key` was granted to `token` already (the caller may
  // skip reading it).
  bool Granted(const std::string& token, const std::string& store, const std::string& index_key);

  size_t chunks(const std::string& token, const std::string& store);

 private:
  struct Entry {
    DigestSet chunks;
    std::set<std::string> indexes;
    std::chrono::steady_clock::time_point last_used;
  };
  using Key = std::pair<std::string, std::string>;  // token, store
  // Drops entries idle for idle_ or longer (looking at most once a second).
  void ExpireLocked(std::chrono::steady_clock::time_point now) REQUIRES(mu_);

  const size_t max_chunks_;
  const std::chrono::seconds idle_;
  Mutex mu_;
  std::map<Key, Entry> entries_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_expiry_ GUARDED_BY(mu_);
};

}  // namespace cairn::server
