// Key files: a random 256-bit master key wrapped (AES-256-GCM) by a key
// derived from a passphrase with scrypt or Argon2id. JSON, one object; byte
// layout and parameters in docs/FORMAT.md, "Key file".
//
//   wrapping key = KDF(passphrase, salt)              32 bytes
//   wrapped_key  = nonce (12) | AES-256-GCM(wrapping key, nonce,
//                  aad "cairn-key v1", master) (32) | tag (16)
//   fingerprint  = CryptConfig::FromMasterKey(master)->fingerprint()
//
// The KDF and its parameters are stored in the file, so unwrapping follows
// whatever the file says, within bounds (KdfParams::Check) that keep a
// hostile file from making us allocate or compute without limit.
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

inline constexpr char kKeyFileFormat[] = "cairn-key";
inline constexpr int kKeyFileVersion = 1;
inline constexpr char kKeyWrapAad[] = "cairn-key v1";
inline constexpr size_t kKdfSaltSize = 32;
// Key files are a few hundred bytes; anything past this is not one.
inline constexpr size_t kMaxKeyFileSize = 64 * 1024;
// Upper bound on the memory either KDF may be asked to use (2 GiB).
inline constexpr uint64_t kMaxKdfMemoryBytes = uint64_t{2} << 30;

// The cost parameters of one KDF; only the fields of `kdf` are used.
struct KdfParams {
  Kdf kdf = Kdf::kScrypt;
  // scrypt: N (a power of two ≥ 2), r, p; memory 128·N·r bytes.
  uint64_t scrypt_n = uint64_t{1} << 16;
  uint32_t scrypt_r = 8;
  uint32_t scrypt_p = 1;
  // Argon2id: passes, memory in KiB, lanes (and threads).
  uint32_t argon2_t = 3;
  uint32_t argon2_m_kib = 64 * 1024;
  uint32_t argon2_p = 1;

  // OK when the parameters are within the bounds a reader accepts
  // (docs/FORMAT.md): memory ≤ kMaxKdfMemoryBytes, scrypt r ≤ 32, p ≤ 16,
  // Argon2id t ≤ 16, p ≤ 16, m ≥ 8·p KiB. InvalidArgument otherwise.
  Status Check() const;
  // "N=65536 r=8 p=1" or "t=3 m=65536KiB p=1".
  std::string ToString() const;
};

// The defaults of `cairn key create`: scrypt N=2^16 r=8 p=1 (64 MiB), or
// Argon2id t=3 m=64 MiB p=1.
KdfParams DefaultKdfParams(Kdf kdf);
// TEST ONLY (CAIRN_TEST_WEAK_KDF=1): parameters that take about a
// millisecond, for test suites that create and unwrap many keys. A key file
// made with them is only as strong as its passphrase.
KdfParams WeakKdfParams(Kdf kdf);

// What a key file says without its passphrase.
struct KeyFileInfo {
  Kdf kdf = Kdf::kScrypt;
  std::string kdf_params;  // human-readable, "N=65536 r=8 p=1"
  int64_t created_unix = 0;
  Digest fingerprint{};  // of the master key (CryptConfig::fingerprint())
  KdfParams params;      // the parameters themselves
};

// A new key file's text wrapping `master` under `passphrase`, with the
// default parameters of `kdf`.
Result<std::string> WrapKey(const Key256& master, std::string_view passphrase, Kdf kdf,
                            int64_t created_unix);
// The same with explicit parameters (InvalidArgument when out of bounds);
// a fresh random salt and nonce each call.
Result<std::string> WrapKeyWith(const Key256& master, std::string_view passphrase,
                                const KdfParams& params, int64_t created_unix);
// DataLoss on a malformed or truncated file, naming what is wrong (KDF
// parameters out of bounds included); Unimplemented for a newer version.
Result<KeyFileInfo> ParseKeyFile(std::string_view text);
// PermissionDenied ("wrong passphrase") when the passphrase does not unwrap
// it (an altered kdf, salt or wrapped_key reads the same); DataLoss when the
// file is malformed or its fingerprint does not match the unwrapped key;
// ResourceExhausted when the KDF cannot get its memory.
Result<Key256> UnwrapKey(std::string_view text, std::string_view passphrase);

}  // namespace cairn::crypto
