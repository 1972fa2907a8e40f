#include "s3/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <iterator>

#include <fmt/format.h>

#include "base/text.h"

namespace cairn::s3 {
namespace {

// Trims both ends and folds inner runs of spaces/tabs to one space.
std::string TrimValue(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

Pairs CanonicalHeaders(const Pairs& headers) {
  Pairs out;
  out.reserve(headers.size());
  for (const auto& [name, value] : headers) out.emplace_back(AsciiLower(name), TrimValue(value));
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Repeated names are joined with ',' as the spec says (S3 requests here
  // never repeat one, but the canonical form must still be right).
  Pairs merged;
  for (auto& h : out) {
    if (!merged.empty() && merged.back().first == h.first) {
      merged.back().second.push_back(',');
      merged.back().second += h.second;
    } else {
      merged.push_back(std::move(h));
    }
  }
  return merged;
}

}  // namespace

std::string UriEncode(std::string_view text, bool keep_slash) {
  return PercentEncode(text, keep_slash);
}

std::string CanonicalUri(std::string_view path) {
  if (path.empty()) return "/";
  return UriEncode(path, /*keep_slash=*/true);
}

std::string CanonicalQuery(const Pairs& query) {
  Pairs enc;
  enc.reserve(query.size());
  for (const auto& [k, v] : query) enc.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(enc.begin(), enc.end());
  std::string out;
  for (const auto& [k, v] : enc) {
    if (!out.empty()) out.push_back('&');
    out += k;
    out.push_back('=');
    out += v;
  }
  return out;
}

std::string Sha256Hex(ByteSpan data) {
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256(data.data(), data.size(), md);
  return ToHex(ByteSpan(md, sizeof md));
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const uint8_t*>(data.data()), data.size(), md, &len);
  return std::string(reinterpret_cast<const char*>(md), len);
}

std::string SignedHeaderNames(const Pairs& headers) {
  std::string out;
  for (const auto& [name, value] : CanonicalHeaders(headers)) {
    if (!out.empty()) out.push_back(';');
    out += name;
  }
  return out;
}

std::string CanonicalRequest(const SigningRequest& request) {
  std::string out = fmt::format("{}\n{}\n{}\n", request.method, CanonicalUri(request.path),
                                CanonicalQuery(request.query));
  for (const auto& [name, value] : CanonicalHeaders(request.headers)) {
    fmt::format_to(std::back_inserter(out), "{}:{}\n", name, value);
  }
  fmt::format_to(std::back_inserter(out), "\n{}\n{}", SignedHeaderNames(request.headers),
                 request.payload_hash);
  return out;
}

static std::string Scope(const SigningParams& p) {
  return fmt::format("{}/{}/{}/aws4_request", p.amz_date.substr(0, 8), p.region, p.service);
}

std::string StringToSign(std::string_view canonical_request, const SigningParams& params) {
  return fmt::format("{}\n{}\n{}\n{}", kSigV4Algorithm, params.amz_date, Scope(params),
                     Sha256Hex(AsBytes(canonical_request)));
}

std::string SigningKey(const SigningParams& params) {
  std::string k = HmacSha256(fmt::format("AWS4{}", params.secret_key), params.amz_date.substr(0, 8));
  k = HmacSha256(k, params.region);
  k = HmacSha256(k, params.service);
  return HmacSha256(k, "aws4_request");
}

std::string Signature(const SigningRequest& request, const SigningParams& params) {
  std::string mac = HmacSha256(SigningKey(params), StringToSign(CanonicalRequest(request), params));
  return ToHex(AsBytes(mac));
}

std::string AuthorizationHeader(const SigningRequest& request, const SigningParams& params) {
  return fmt::format("{} Credential={}/{},SignedHeaders={},Signature={}", kSigV4Algorithm,
                     params.access_key, Scope(params), SignedHeaderNames(request.headers),
                     Signature(request, params));
}

std::string AmzDate(int64_t unix_seconds) {
  time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

}  // namespace cairn::s3
