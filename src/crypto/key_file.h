// Key files: a random 256-bit master key wrapped (AES-256-GCM) by a key
// derived from a passphrase with scrypt or Argon2id. JSON, one object; byte
// layout and parameters in docs/FORMAT.md, "Key file".
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "crypto/crypt_config.h"

namespace cairn::crypto {

enum class Kdf { kScrypt, kArgon2id };
const char* KdfName(Kdf kdf);                 // "scrypt", "argon2id"
Result<Kdf> ParseKdf(std::string_view name);  // InvalidArgument otherwise

// What a key file says without its passphrase.
struct KeyFileInfo {
  Kdf kdf = Kdf::kScrypt;
  std::string kdf_params;  // human-readable, "N=65536 r=8 p=1"
  int64_t created_unix = 0;
  Digest fingerprint{};  // of the master key (CryptConfig::fingerprint())
};

// A new key file's text wrapping `master` under `passphrase`.
Result<std::string> WrapKey(const Key256& master, std::string_view passphrase, Kdf kdf,
                            int64_t created_unix);
// DataLoss on a malformed or truncated file.
Result<KeyFileInfo> ParseKeyFile(std::string_view text);
// PermissionDenied ("wrong passphrase") when the passphrase does not unwrap
// it; DataLoss when the file is malformed or its fingerprint does not match.
Result<Key256> UnwrapKey(std::string_view text, std::string_view passphrase);

}  // namespace cairn::crypto
