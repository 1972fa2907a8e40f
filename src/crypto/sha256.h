// SHA-256 over OpenSSL 3's EVP interface (SHA-NI where the CPU has it).
// A plain chunk's id is the SHA-256 of its plaintext; an encrypted one's is
// keyed (HMAC-SHA256 with the key's id key: crypto/crypt_config.h).
//
// Thread safety: Sha256() is pure; a Sha256Hasher is used by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::crypto {

using Digest = std::array<uint8_t, 32>;

Digest Sha256(ByteSpan data);

// Hash functor for unordered containers: SHA-256 output is already uniform,
// so its first eight bytes are a perfect hash.
struct DigestHash {
  size_t operator()(const Digest& d) const {
    size_t h;
    __builtin_memcpy(&h, d.data(), sizeof(h));
    return h;
  }
};

inline std::string DigestHex(const Digest& d) { return ToHex(d); }
// InvalidArgument unless `hex` is 64 hex characters.
Result<Digest> ParseDigestHex(std::string_view hex);

class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;

  void Update(ByteSpan data);
  Digest Finish();  // the hasher may not be used afterwards

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

}  // namespace cairn::crypto
