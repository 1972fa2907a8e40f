#include "crypto/key_file.h"

namespace cairn::crypto {

const char* KdfName(Kdf kdf) { return kdf == Kdf::kScrypt ? "scrypt" : "argon2id"; }
Result<Kdf> ParseKdf(std::string_view) { return UnimplementedError("key files: not yet"); }
Result<std::string> WrapKey(const Key256&, std::string_view, Kdf, int64_t) {
  return UnimplementedError("key files: not yet");
}
Result<KeyFileInfo> ParseKeyFile(std::string_view) { return UnimplementedError("key files: not yet"); }
Result<Key256> UnwrapKey(std::string_view, std::string_view) {
  return UnimplementedError("key files: not yet");
}

}  // namespace cairn::crypto
