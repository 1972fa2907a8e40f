#include "crypto/sha256.h"

#include <openssl/evp.h>

#include <cstdlib>

#include <fmt/format.h>

namespace cairn::crypto {

struct Sha256Hasher::Ctx {
  EVP_MD_CTX* md = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Digest Sha256(ByteSpan data) {
  Digest out;
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1) {
    std::abort();  // only fails when OpenSSL cannot allocate: not recoverable
  }
  return out;
}

Result<Digest> ParseDigestHex(std::string_view hex) {
  Digest d;
  if (!FromHex(hex, d)) {
    return InvalidArgumentError(fmt::format("'{}' is not a SHA-256 digest (64 hex digits)", hex));
  }
  return d;
}

Sha256Hasher::Sha256Hasher() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256Hasher::~Sha256Hasher() = default;

void Sha256Hasher::Update(ByteSpan data) {
  if (EVP_DigestUpdate(ctx_->md, data.data(), data.size()) != 1) std::abort();
}

Digest Sha256Hasher::Finish() {
  Digest out;
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out.data(), &len) != 1) std::abort();
  return out;
}

}  // namespace cairn::crypto
