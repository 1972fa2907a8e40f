// AWS Signature Version 4 for S3 (pure functions, no I/O).
//
// Signing a request is four steps (AWS "Signature Calculations for the
// Authorization Header"):
//   1. canonical request: METHOD \n URI \n QUERY \n HEADERS \n SIGNED \n PAYLOAD_HASH
//      - URI: each path segment percent-encoded (RFC 3986 unreserved kept),
//        '/' kept; S3 does not normalise the path (no "." / ".." folding,
//        no double encoding).
//      - QUERY: name=value pairs, both encoded ('/' too), sorted by encoded
//        name then value; a name without value is "name=".
//      - HEADERS: lowercase names, values trimmed with inner runs of spaces
//        folded to one, sorted by name, "name:value\n" each.
//   2. string to sign: "AWS4-HMAC-SHA256\n" DATE "\n" SCOPE "\n" hex(SHA256(step 1))
//   3. signing key: HMAC chain "AWS4"+secret → date → region → "s3" → "aws4_request"
//   4. signature: hex(HMAC(key, step 2)); Authorization header
//      "AWS4-HMAC-SHA256 Credential=AK/SCOPE, SignedHeaders=…, Signature=…".
// The payload hash is hex(SHA256(body)) or kUnsignedPayload.
//
// Thread safety: pure functions; safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/bytes.h"

namespace cairn::s3 {

inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";
inline constexpr std::string_view kSigV4Algorithm = "AWS4-HMAC-SHA256";

using Pairs = std::vector<std::pair<std::string, std::string>>;

// What is signed. `path` is the raw (unencoded) path starting with '/',
// e.g. "/bucket/dir/key$1"; `query` raw names and values; `headers` must
// include "host" and "x-amz-date" and normally "x-amz-content-sha256".
struct SigningRequest {
  std::string method;
  std::string path;
  Pairs query;
  Pairs headers;
  std::string payload_hash;  // hex SHA-256 of the body, or kUnsignedPayload
};

struct SigningParams {
  std::string access_key;
  std::string secret_key;
  std::string region;    // "us-east-1"
  std::string amz_date;  // "20130524T000000Z" (ISO 8601 basic, UTC)
  std::string service = "s3";
};

// Percent-encodes `text` the S3 way: A-Z a-z 0-9 - _ . ~ kept, every other
// byte as %XY (uppercase); '/' kept only when `keep_slash`.
std::string UriEncode(std::string_view text, bool keep_slash);

// The path as it goes on the wire and into the canonical request.
std::string CanonicalUri(std::string_view path);
// Sorted, encoded "a=1&b=2"; the same string is used on the wire.
std::string CanonicalQuery(const Pairs& query);

std::string Sha256Hex(ByteSpan data);
std::string HmacSha256(std::string_view key, std::string_view data);  // raw 32 bytes

std::string CanonicalRequest(const SigningRequest& request);
// "host;range;x-amz-date": lowercase, sorted names of `headers`.
std::string SignedHeaderNames(const Pairs& headers);
std::string StringToSign(std::string_view canonical_request, const SigningParams& params);
// Raw 32-byte key for date (first 8 characters of amz_date), region, service.
std::string SigningKey(const SigningParams& params);
std::string Signature(const SigningRequest& request, const SigningParams& params);  // hex
std::string AuthorizationHeader(const SigningRequest& request, const SigningParams& params);

// "20130524T000000Z" for a Unix time.
std::string AmzDate(int64_t unix_seconds);

}  // namespace cairn::s3
