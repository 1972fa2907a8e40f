// S3Client: an S3 client for one bucket over libcurl's multi interface,
// built for many requests in flight (a restore keeps 32–128 GETs going).
//
// Design: one I/O thread owns one CURLM and a pool of reusable easy
// handles. Submitting a request (any thread) queues it and wakes the
// thread; the thread keeps up to `max_connections` transfers on the wire,
// queues the rest, runs the retries (exponential backoff with jitter) on
// timers, and calls each `done` callback on completion. Why one thread:
// HTTP on loopback or a LAN costs little CPU per byte (copying into a
// buffer); the expensive work — signing payload hashes, MD5, and whatever
// the caller does with the bytes — runs on the submitting threads and in
// the callers' own workers. curl_multi multiplexes hundreds of sockets on
// one poll(), so a thread per request (or a pool of blocking connections)
// would buy nothing but context switches. Keep-alive: the connection cache
// lives in the multi handle, so every request reuses an idle connection to
// the endpoint when there is one; easy handles are reset and reused too.
//
// Every request is signed with SigV4 (sigv4.h) afresh on each attempt
// (x-amz-date changes), with the payload's SHA-256 as x-amz-content-sha256,
// and Content-MD5 on POST (multi-object delete, where S3 requires it) and
// on every request with a body, unless ProbePayloadHashCheck() has shown
// that the server checks the signed SHA-256 against the body (S3 and RGW
// do): then a signed PUT goes without the MD5. Retries: transport errors (connect, reset,
// timeout) and 5xx/SlowDown/RequestTimeout, up to retry.max_attempts;
// never another 4xx. Error mapping: s3_protocol.h.
//
// Thread safety: all methods may be called from any thread. `done`
// callbacks run on the client's I/O thread, one at a time (except a request
// that cannot even be built, e.g. a bucket unfit for virtual-host
// addressing: its `done` runs at once on the submitting thread). Callbacks
// must not block and must not call the synchronous methods (which would
// wait on the very thread that has to answer them); they may submit
// further requests. Destroying the client ends every pending request with
// Cancelled: each callback still runs, on the I/O thread, before the
// destructor returns. REQUIRES: no Submit() races with the destructor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/status.h"
#include "s3/s3_config.h"
#include "s3/s3_protocol.h"

namespace cairn::s3 {

// Bytes [offset, offset + length) of an object; length > 0.
struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;
};

struct PutOptions {
  // Sends If-None-Match: * so the PUT only creates: an existing key gives
  // AlreadyExists and keeps its content (Ceph RGW and AWS honour it).
  // Caveat: if an attempt was stored but its answer lost (a timeout), the
  // retry meets our own object and reports AlreadyExists. Harmless for
  // content-addressed chunks; a lock must read the object back to be sure.
  bool create_only = false;
  std::string content_type = "application/octet-stream";
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;
};

struct ListOptions {
  std::string prefix;
  std::string delimiter;  // "/" to get CommonPrefixes; empty lists every key
  int max_keys = 1000;    // per page (S3 caps at 1000)
};

struct ListResult {
  std::vector<ObjectEntry> objects;
  std::vector<std::string> common_prefixes;
  int pages = 0;
};

struct DeleteReport {
  size_t requested = 0;
  std::vector<DeleteFailure> failures;  // keys the server refused
};

// One HTTP exchange before interpretation (the generic request type).
struct S3Request {
  std::string operation;  // for messages: "GetObject"
  std::string method;     // GET PUT POST HEAD DELETE
  std::string bucket;     // empty: a service-level request
  std::string key;
  Pairs query;
  Pairs headers;  // extra headers (Range, If-None-Match, Content-Type)
  Bytes body;
  bool sign_payload = true;  // false: x-amz-content-sha256 = UNSIGNED-PAYLOAD
  // Empty: the body's SHA-256 (or UNSIGNED-PAYLOAD). Set: sent and signed
  // as given, whatever the body (ProbePayloadHashCheck's wrong hash).
  std::string payload_hash;
};

struct S3Response {
  int http_status = 0;
  Pairs headers;  // names lowercased
  Bytes body;
  int attempts = 0;
};

// `Status` of a transport failure after the last attempt; `response` for any
// HTTP answer, also non-2xx (the caller maps it: ErrorStatus).
using RawCallback = std::function<void(Result<S3Response>)>;

class S3Client {
 public:
  // Checks the endpoint and starts the I/O thread; no request is made.
  static Result<std::unique_ptr<S3Client>> Open(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const;

  // --- Asynchronous: `done` runs exactly once on the I/O thread. ---
  void PutObjectAsync(std::string key, Bytes body, PutOptions options,
                      std::function<void(Status)> done);
  void GetObjectAsync(std::string key, std::optional<ByteRange> range,
                      std::function<void(Result<Bytes>)> done);
  void HeadObjectAsync(std::string key, std::function<void(Result<ObjectInfo>)> done);
  // The building block: sends `request` (signed, retried) and hands back
  // the HTTP answer, whatever its status.
  void Submit(S3Request request, RawCallback done);

  // --- Synchronous: the asynchronous call plus a wait. ---
  Status PutObject(const std::string& key, Bytes body, const PutOptions& options = {});
  Result<Bytes> GetObject(const std::string& key, std::optional<ByteRange> range = std::nullopt);
  // NotFound for a missing key. A HEAD answer has no body, so a missing
  // bucket also reads as NotFound here; HeadBucket() tells them apart.
  Result<ObjectInfo> HeadObject(const std::string& key);
  // Deletes `keys` in batches of up to `batch` (at most 1000, S3's limit;
  // all batches in flight at once).
  // A Status error means a batch request failed as a whole; keys the server
  // refused one by one are in the report. Missing keys count as deleted.
  Result<DeleteReport> DeleteObjects(std::span<const std::string> keys,
                                     size_t batch = kMaxDeleteBatch);
  // Every page, following continuation tokens.
  Result<ListResult> ListObjectsV2(const ListOptions& options);
  // AlreadyExists when the bucket exists (owned by us or not).
  Status CreateBucket();
  // OK when the bucket exists and the credentials may use it;
  // FailedPrecondition (NoSuchBucket) when it does not.
  Status HeadBucket();
  Status DeleteBucket();

  // Whether the server refuses a body that does not match its signed
  // x-amz-content-sha256 (S3 and Ceph RGW do; not every S3-compatible
  // server does). Until a probe has shown it, every PUT with a body also
  // carries Content-MD5, which every server checks; after, signed PUTs go
  // without (the MD5 cost more CPU than the SHA-256 beside it). The probe:
  // one PUT of `probe_key` signed for other bytes than it carries; a 400
  // XAmzContentSHA256Mismatch says the server checks; a stored object (then
  // deleted again) or any other answer says it does not, or that we cannot
  // tell: MD5 stays. Returns the verdict, which later calls keep; the
  // first caller probes, concurrent ones wait for it.
  bool ProbePayloadHashCheck(const std::string& probe_key);
  bool payload_hash_checked() const;

  // Sent, retried, completed: counters for tests and logs.
  struct Stats {
    uint64_t requests = 0;
    uint64_t retries = 0;
    uint64_t connections_opened = 0;
  };
  Stats stats() const;

  class Impl;

 private:
  explicit S3Client(std::unique_ptr<Impl> impl);
  Result<S3Response> Call(S3Request request);
  bool ProbeServerChecksPayloadHash(const std::string& probe_key);
  std::unique_ptr<Impl> impl_;
};

// Whether a libcurl result code (CURLcode) is a transport failure worth a
// retry: connection refused or reset, timeouts, a truncated answer.
bool IsRetryableCurlError(int curl_code);

// Base64 of the MD5 of `data`, for Content-MD5.
std::string ContentMd5(ByteSpan data);
// Lowercase hex of the MD5 of `data`: the ETag of an object stored by a
// plain PUT.
std::string Md5Hex(ByteSpan data);

}  // namespace cairn::s3
