#include "crypto/key_file.h"

#include <argon2.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

namespace cairn::crypto {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kWrappedSize = kGcmNonceSize + sizeof(Key256) + kGcmTagSize;

// Wipes a derived key when it goes out of scope.
struct CleansedKey {
  Key256 bytes{};
  ~CleansedKey() { OPENSSL_cleanse(bytes.data(), bytes.size()); }
};

struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;

Status DeriveWrappingKey(const KdfParams& p, std::string_view passphrase, ByteSpan salt,
                         Key256* out) {
  CAIRN_RETURN_IF_ERROR(p.Check());
  if (p.kdf == Kdf::kScrypt) {
    // OpenSSL needs 128·r·(N+2) bytes for V plus 128·r·p for B; give it
    // exactly what these (bounded) parameters need, plus slack.
    const uint64_t maxmem = 128 * uint64_t{p.scrypt_r} * (p.scrypt_n + 2) +
                            128 * uint64_t{p.scrypt_r} * p.scrypt_p + (1 << 20);
    if (EVP_PBE_scrypt(passphrase.data(), passphrase.size(), salt.data(), salt.size(), p.scrypt_n,
                       p.scrypt_r, p.scrypt_p, maxmem, out->data(), out->size()) != 1) {
      return ResourceExhaustedError(
          fmt::format("scrypt ({}) failed: cannot allocate {} bytes", p.ToString(), maxmem));
    }
    return Status::Ok();
  }
  const int rc =
      argon2id_hash_raw(p.argon2_t, p.argon2_m_kib, p.argon2_p, passphrase.data(),
                        passphrase.size(), salt.data(), salt.size(), out->data(), out->size());
  if (rc != ARGON2_OK) {
    std::string why = argon2_error_message(rc);
    return rc == ARGON2_MEMORY_ALLOCATION_ERROR
               ? ResourceExhaustedError(fmt::format("argon2id ({}) failed: {}", p.ToString(), why))
               : InternalError(fmt::format("argon2id ({}) failed: {}", p.ToString(), why));
  }
  return Status::Ok();
}

// AES-256-GCM of the master key; `out` is nonce | ciphertext | tag.
void Seal(const Key256& key, const Key256& master, std::span<uint8_t, kWrappedSize> out) {
  RandomBytes(out.first(kGcmNonceSize));
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  const ByteSpan aad = AsBytes(kKeyWrapAad);
  uint8_t* ct = out.data() + kGcmNonceSize;
  if (!ctx ||
      EVP_EncryptInit_ex2(ctx.get(), EVP_aes_256_gcm(), key.data(), out.data(), nullptr) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), ct, &len, master.data(), static_cast<int>(master.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), ct + master.size(), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kGcmTagSize, ct + master.size()) != 1) {
    std::abort();  // AES-GCM cannot fail on valid arguments short of allocation
  }
}

// False when the tag does not match (another passphrase, or altered bytes).
bool Open(const Key256& key, std::span<const uint8_t, kWrappedSize> in, Key256* master) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  int len = 0;
  const ByteSpan aad = AsBytes(kKeyWrapAad);
  const uint8_t* ct = in.data() + kGcmNonceSize;
  if (!ctx ||
      EVP_DecryptInit_ex2(ctx.get(), EVP_aes_256_gcm(), key.data(), in.data(), nullptr) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), master->data(), &len, ct, static_cast<int>(master->size())) !=
          1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kGcmTagSize,
                          const_cast<uint8_t*>(ct + master->size())) != 1) {
    std::abort();
  }
  if (EVP_DecryptFinal_ex(ctx.get(), master->data() + master->size(), &len) != 1) {
    OPENSSL_cleanse(master->data(), master->size());
    return false;
  }
  return true;
}

// --- parsing -------------------------------------------------------------

Status Malformed(std::string_view what) {
  return DataLossError(fmt::format("malformed key file: {}", what));
}

// A JSON value for an error message, cut short: the file may be hostile.
std::string Show(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

Result<const Json*> Member(const Json& obj, std::string_view path, std::string_view name) {
  auto it = obj.find(name);
  if (it == obj.end()) return Malformed(fmt::format("member \"{}{}\" is missing", path, name));
  return &*it;
}

Result<uint64_t> Unsigned(const Json& obj, std::string_view path, std::string_view name,
                          uint64_t max) {
  CAIRN_ASSIGN_OR_RETURN(const Json* v, Member(obj, path, name));
  if (!v->is_number_unsigned() || v->get<uint64_t>() > max) {
    return Malformed(fmt::format("member \"{}{}\" is {}, not an integer from 0 to {}", path, name,
                                 Show(*v), max));
  }
  return v->get<uint64_t>();
}

Result<std::string> String(const Json& obj, std::string_view path, std::string_view name) {
  CAIRN_ASSIGN_OR_RETURN(const Json* v, Member(obj, path, name));
  if (!v->is_string()) {
    return Malformed(fmt::format("member \"{}{}\" is {}, not a string", path, name, Show(*v)));
  }
  return v->get<std::string>();
}

Status Hex(const Json& obj, std::string_view path, std::string_view name, MutableByteSpan out) {
  CAIRN_ASSIGN_OR_RETURN(std::string text, String(obj, path, name));
  if (!FromHex(text, out)) {
    return Malformed(fmt::format("member \"{}{}\" is not {} hex digits (it has {} characters)",
                                 path, name, out.size() * 2, text.size()));
  }
  return Status::Ok();
}

Result<KdfParams> ParseKdfObject(const Json& kdf) {
  if (!kdf.is_object()) return Malformed(fmt::format("\"kdf\" is {}, not an object", Show(kdf)));
  CAIRN_ASSIGN_OR_RETURN(std::string name, String(kdf, "kdf.", "name"));
  auto which = ParseKdf(name);
  if (!which.ok()) return Malformed(fmt::format("unknown kdf \"{}\" (scrypt or argon2id)", name));
  KdfParams p;
  p.kdf = *which;
  constexpr uint64_t kU32 = UINT32_MAX;
  if (p.kdf == Kdf::kScrypt) {
    CAIRN_ASSIGN_OR_RETURN(p.scrypt_n, Unsigned(kdf, "kdf.", "n", UINT64_MAX));
    CAIRN_ASSIGN_OR_RETURN(uint64_t r, Unsigned(kdf, "kdf.", "r", kU32));
    CAIRN_ASSIGN_OR_RETURN(uint64_t pp, Unsigned(kdf, "kdf.", "p", kU32));
    p.scrypt_r = static_cast<uint32_t>(r);
    p.scrypt_p = static_cast<uint32_t>(pp);
  } else {
    CAIRN_ASSIGN_OR_RETURN(uint64_t t, Unsigned(kdf, "kdf.", "t", kU32));
    CAIRN_ASSIGN_OR_RETURN(uint64_t m, Unsigned(kdf, "kdf.", "m_kib", kU32));
    CAIRN_ASSIGN_OR_RETURN(uint64_t pp, Unsigned(kdf, "kdf.", "p", kU32));
    p.argon2_t = static_cast<uint32_t>(t);
    p.argon2_m_kib = static_cast<uint32_t>(m);
    p.argon2_p = static_cast<uint32_t>(pp);
  }
  Status bounds = p.Check();
  if (!bounds.ok()) return Malformed(fmt::format("kdf parameters: {}", bounds.message()));
  return p;
}

// Everything a key file holds.
struct ParsedKeyFile {
  KeyFileInfo info;
  std::array<uint8_t, kKdfSaltSize> salt{};
  std::array<uint8_t, kWrappedSize> wrapped{};
};

Result<ParsedKeyFile> ParseUnchecked(std::string_view text) {
  if (text.size() > kMaxKeyFileSize) {
    return Malformed(
        fmt::format("{} bytes; a key file is under {} bytes", text.size(), kMaxKeyFileSize));
  }
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    // "… parse error at line 1, column 57: syntax error … unexpected end of input"
    std::string_view what = e.what();
    if (auto p = what.find("] "); p != what.npos) what.remove_prefix(p + 2);
    return Malformed(fmt::format("not JSON (truncated?): {}", what));
  }
  if (!j.is_object()) return Malformed("not a JSON object");
  CAIRN_ASSIGN_OR_RETURN(std::string format, String(j, "", "format"));
  if (format != kKeyFileFormat) {
    return Malformed(fmt::format("format is \"{}\", not \"{}\"", format, kKeyFileFormat));
  }
  CAIRN_ASSIGN_OR_RETURN(uint64_t version, Unsigned(j, "", "version", UINT32_MAX));
  if (version > kKeyFileVersion) {
    return UnimplementedError(fmt::format(
        "key file version {} is newer than this cairn reads (version {}): upgrade cairn", version,
        kKeyFileVersion));
  }
  if (version != kKeyFileVersion) return Malformed(fmt::format("version {} is invalid", version));
  ParsedKeyFile f;
  CAIRN_ASSIGN_OR_RETURN(uint64_t created, Unsigned(j, "", "created_unix", INT64_MAX));
  f.info.created_unix = static_cast<int64_t>(created);
  CAIRN_ASSIGN_OR_RETURN(const Json* kdf, Member(j, "", "kdf"));
  CAIRN_ASSIGN_OR_RETURN(f.info.params, ParseKdfObject(*kdf));
  f.info.kdf = f.info.params.kdf;
  f.info.kdf_params = f.info.params.ToString();
  CAIRN_RETURN_IF_ERROR(Hex(*kdf, "kdf.", "salt", f.salt));
  CAIRN_RETURN_IF_ERROR(Hex(j, "", "wrapped_key", f.wrapped));
  CAIRN_RETURN_IF_ERROR(Hex(j, "", "fingerprint", f.info.fingerprint));
  return f;
}

// Exceptions stay inside: nlohmann throws on what ParseUnchecked misses.
Result<ParsedKeyFile> Parse(std::string_view text) {
  try {
    return ParseUnchecked(text);
  } catch (const std::exception& e) {
    return Malformed(e.what());
  }
}

}  // namespace

const char* KdfName(Kdf kdf) { return kdf == Kdf::kScrypt ? "scrypt" : "argon2id"; }

Result<Kdf> ParseKdf(std::string_view name) {
  if (name == "scrypt") return Kdf::kScrypt;
  if (name == "argon2id") return Kdf::kArgon2id;
  return InvalidArgumentError(fmt::format("unknown KDF '{}' (scrypt or argon2id)", name));
}

Status KdfParams::Check() const {
  if (kdf == Kdf::kScrypt) {
    const uint64_t n = scrypt_n;
    if (n < 2 || (n & (n - 1)) != 0 || n > (uint64_t{1} << 32)) {
      return InvalidArgumentError(
          fmt::format("scrypt N={} is not a power of two from 2 to 2^32", n));
    }
    if (scrypt_r == 1 && n >= (uint64_t{1} << 16)) {  // OpenSSL: N < 2^(16·r)
      return InvalidArgumentError(fmt::format("scrypt N={} needs r of 2 or more", n));
    }
    if (scrypt_r < 1 || scrypt_r > 32 || scrypt_p < 1 || scrypt_p > 16) {
      return InvalidArgumentError(fmt::format(
          "scrypt r={} p={} out of bounds (r from 1 to 32, p from 1 to 16)", scrypt_r, scrypt_p));
    }
    if (128 * uint64_t{scrypt_r} * n > kMaxKdfMemoryBytes) {
      return InvalidArgumentError(
          fmt::format("scrypt N={} r={} needs {} bytes of memory, more than the {} allowed", n,
                      scrypt_r, 128 * uint64_t{scrypt_r} * n, kMaxKdfMemoryBytes));
    }
    return Status::Ok();
  }
  if (argon2_t < 1 || argon2_t > 16 || argon2_p < 1 || argon2_p > 16) {
    return InvalidArgumentError(fmt::format(
        "argon2id t={} p={} out of bounds (t from 1 to 16, p from 1 to 16)", argon2_t, argon2_p));
  }
  if (argon2_m_kib < 8 * argon2_p || uint64_t{argon2_m_kib} * 1024 > kMaxKdfMemoryBytes) {
    return InvalidArgumentError(
        fmt::format("argon2id m={}KiB out of bounds (from 8·p KiB to {} KiB)", argon2_m_kib,
                    kMaxKdfMemoryBytes / 1024));
  }
  return Status::Ok();
}

std::string KdfParams::ToString() const {
  if (kdf == Kdf::kScrypt) return fmt::format("N={} r={} p={}", scrypt_n, scrypt_r, scrypt_p);
  return fmt::format("t={} m={}KiB p={}", argon2_t, argon2_m_kib, argon2_p);
}

KdfParams DefaultKdfParams(Kdf kdf) {
  KdfParams p;
  p.kdf = kdf;
  return p;
}

KdfParams WeakKdfParams(Kdf kdf) {
  KdfParams p;
  p.kdf = kdf;
  p.scrypt_n = 1024;  // 1 MiB with r=8
  p.argon2_t = 1;
  p.argon2_m_kib = 256;
  return p;
}

Result<std::string> WrapKey(const Key256& master, std::string_view passphrase, Kdf kdf,
                            int64_t created_unix) {
  return WrapKeyWith(master, passphrase, DefaultKdfParams(kdf), created_unix);
}

Result<std::string> WrapKeyWith(const Key256& master, std::string_view passphrase,
                                const KdfParams& params, int64_t created_unix) {
  if (created_unix < 0) {
    return InvalidArgumentError(fmt::format("key creation time {} is before 1970", created_unix));
  }
  std::array<uint8_t, kKdfSaltSize> salt;
  RandomBytes(salt);
  CleansedKey wrapping;
  CAIRN_RETURN_IF_ERROR(DeriveWrappingKey(params, passphrase, salt, &wrapping.bytes));
  std::array<uint8_t, kWrappedSize> wrapped;
  Seal(wrapping.bytes, master, wrapped);

  Json kdf = {{"name", KdfName(params.kdf)}};
  if (params.kdf == Kdf::kScrypt) {
    kdf["n"] = params.scrypt_n;
    kdf["r"] = params.scrypt_r;
    kdf["p"] = params.scrypt_p;
  } else {
    kdf["t"] = params.argon2_t;
    kdf["m_kib"] = params.argon2_m_kib;
    kdf["p"] = params.argon2_p;
  }
  kdf["salt"] = ToHex(salt);
  Json j = {{"format", kKeyFileFormat},
            {"version", kKeyFileVersion},
            {"created_unix", created_unix},
            {"kdf", kdf},
            {"wrapped_key", ToHex(wrapped)},
            {"fingerprint", ToHex(CryptConfig::FromMasterKey(master)->fingerprint())}};
  return j.dump(2) + "\n";
}

Result<KeyFileInfo> ParseKeyFile(std::string_view text) {
  CAIRN_ASSIGN_OR_RETURN(ParsedKeyFile f, Parse(text));
  return f.info;
}

Result<Key256> UnwrapKey(std::string_view text, std::string_view passphrase) {
  CAIRN_ASSIGN_OR_RETURN(ParsedKeyFile f, Parse(text));
  CleansedKey wrapping;
  CAIRN_RETURN_IF_ERROR(DeriveWrappingKey(f.info.params, passphrase, f.salt, &wrapping.bytes));
  Key256 master;
  if (!Open(wrapping.bytes, f.wrapped, &master)) {
    return UnauthenticatedError(
        "wrong passphrase for key file (or its kdf, salt or wrapped_key was altered)");
  }
  const Digest actual = CryptConfig::FromMasterKey(master)->fingerprint();
  if (!ConstantTimeEqual(actual, f.info.fingerprint)) {
    OPENSSL_cleanse(master.data(), master.size());
    return DataLossError(fmt::format(
        "key file fingerprint {} does not match its key (fingerprint {}): the file was altered",
        FingerprintText(f.info.fingerprint), FingerprintText(actual)));
  }
  return master;
}

}  // namespace cairn::crypto
