// The S3 wire protocol around the HTTP exchange: error bodies and their
// mapping to Status, which failures are worth a retry, and the XML bodies of
// ListObjectsV2 and DeleteObjects. Pure functions, no I/O.
//
// Status mapping (ErrorStatus):
//   NoSuchKey (or a 404 HEAD of an object)       → NotFound
//   NoSuchBucket                                 → FailedPrecondition: the
//       bucket is configuration, not data; a missing bucket must never pass
//       for a missing chunk.
//   InvalidAccessKeyId, SignatureDoesNotMatch    → PermissionDenied, "bad credentials"
//   AccessDenied and other 403                   → PermissionDenied, "access denied"
//   PreconditionFailed (412, create-only PUT)    → AlreadyExists
//   5xx, SlowDown, RequestTimeout, 429           → Unavailable (retryable)
//   501 NotImplemented                           → Unimplemented (never retried)
//   other 4xx                                    → InvalidArgument / FailedPrecondition
// The message says what (operation, s3://bucket/key), where (endpoint) and
// why (HTTP status, S3 code and message).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"

namespace cairn::s3 {

enum class S3ErrorKind {
  kNone,            // 2xx
  kBadCredentials,  // InvalidAccessKeyId, SignatureDoesNotMatch
  kAccessDenied,
  kNoSuchBucket,
  kNoSuchKey,
  kAlreadyExists,  // 412 PreconditionFailed
  kThrottled,      // SlowDown, 503, 429
  kServerError,    // other 5xx
  kTimeout,        // RequestTimeout, 408
  kClientError,    // any other 4xx
  kNotImplemented,  // 501: a feature the server lacks (Swift: If-None-Match)
};

S3ErrorKind ClassifyError(int http_status, std::string_view s3_code);
// Retry 5xx, throttling and server-side timeouts; never another 4xx.
bool IsRetryable(S3ErrorKind kind);

struct S3ErrorBody {
  std::string code;
  std::string message;
  std::string resource;
  std::string request_id;
};
// Reads <Error><Code/><Message/>…</Error>; a body that is empty or not such
// XML (a proxy's HTML page) gives empty fields, never an error.
S3ErrorBody ParseErrorBody(ByteSpan body);

// What a failed request was, for the message.
struct ErrorContext {
  std::string_view operation;  // "PutObject"
  std::string_view bucket;
  std::string_view key;
  std::string_view endpoint;
};
Status ErrorStatus(const ErrorContext& context, int http_status, ByteSpan body);
// "S3 PutObject s3://b/k at http://h:1" (used by every message).
std::string Describe(const ErrorContext& context);

struct ObjectEntry {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // without quotes; the MD5 in hex for a plain PUT
};
struct ListPage {
  std::vector<ObjectEntry> objects;
  std::vector<std::string> common_prefixes;
  bool is_truncated = false;
  std::string next_continuation_token;
};
// A ListBucketResult; InvalidArgument for malformed XML, a wrong root, a
// Contents without Key, a bad Size, or IsTruncated without a token.
Result<ListPage> ParseListObjectsV2(std::string_view xml);

inline constexpr size_t kMaxDeleteBatch = 1000;
// <Delete><Quiet>true</Quiet><Object><Key>…</Key></Object>…</Delete>
std::string BuildDeleteObjectsBody(std::span<const std::string> keys);

struct DeleteFailure {
  std::string key;
  std::string code;
  std::string message;
};
// The <Error> entries of a DeleteResult (quiet mode lists only failures).
Result<std::vector<DeleteFailure>> ParseDeleteResult(std::string_view xml);

}  // namespace cairn::s3
