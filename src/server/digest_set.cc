#include "server/digest_set.h"

#include "crypto/crypt_config.h"

namespace cairn::server {

namespace {

// Drawn once, then never changed: every set of the process hashes alike.
const std::array<uint64_t, 5>& ProcessSeed() {
  static const std::array<uint64_t, 5> seed = [] {
    std::array<uint64_t, 5> s{};
    std::array<uint8_t, sizeof(s)> raw{};
    crypto::RandomBytes(raw);
    std::memcpy(s.data(), raw.data(), raw.size());
    return s;
  }();
  return seed;
}

}  // namespace

SeededDigestHash::SeededDigestHash() : seed_(ProcessSeed()) {}

}  // namespace cairn::server
