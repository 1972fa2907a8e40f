// Sets of chunk digests the server keeps for clients: a backup session's
// base and uploads, a reader's grants. Their members may be chosen by a
// client (an encrypted upload names any digest it likes), so the hash is
// keyed with a random per-process seed: a client cannot pick digests that
// all land in one bucket and turn every lookup into a scan (crypto's
// DigestHash takes the first 8 bytes as they are, which is right only for
// digests nobody chose).
//
// Thread safety: SeededDigestHash is immutable after construction; the set
// is a plain std::unordered_set (its owner locks).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <unordered_set>

#include "base/splitmix64.h"
#include "crypto/sha256.h"

namespace cairn::server {

class SeededDigestHash {
 public:
  SeededDigestHash();  // a random seed, shared by every set of the process
  size_t operator()(const crypto::Digest& d) const {
    uint64_t h = seed_[0];
    for (size_t i = 0; i < 4; ++i) {
      uint64_t w;
      std::memcpy(&w, d.data() + 8 * i, sizeof(w));
      h = Mix(h ^ w ^ seed_[i + 1]);
    }
    return static_cast<size_t>(h);
  }

 private:
  // splitmix64's finalizer: every input bit reaches every output bit.
  static uint64_t Mix(uint64_t x) { return SplitMix64Mix(x); }
  std::array<uint64_t, 5> seed_;
};

using DigestSet = std::unordered_set<crypto::Digest, SeededDigestHash>;

}  // namespace cairn::server
