// Configuration of an S3 client: endpoint, region, bucket, addressing style,
// credentials, timeouts, retries; and the pure functions that turn a bucket,
// key and query into the URL, Host header and path to sign.
//
// Addressing:
//   path style (default; what Ceph RGW and every IP endpoint need):
//     http://HOST:PORT/BUCKET/KEY        Host: HOST:PORT
//   virtual-host style:
//     http://BUCKET.HOST:PORT/KEY        Host: BUCKET.HOST:PORT
//
// Credentials (LoadCredentials): AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
// (+ AWS_SESSION_TOKEN) from the environment, else the profile
// AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE or
// ~/.aws/credentials.
//
// Thread safety: value types and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/env.h"
#include "base/rate_limiter.h"
#include "base/status.h"
#include "s3/sigv4.h"

namespace cairn::s3 {

struct Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // sent as x-amz-security-token when set
};

enum class Addressing { kPathStyle, kVirtualHost };

struct RetryPolicy {
  int max_attempts = 5;  // first try included
  std::chrono::milliseconds base_delay{100};
  std::chrono::milliseconds max_delay{5'000};
};

struct S3Config {
  std::string endpoint;  // "http://127.0.0.1:7480" or "https://s3.example.com"
  std::string region = "us-east-1";
  std::string bucket;
  Addressing addressing = Addressing::kPathStyle;
  Credentials credentials;
  std::chrono::milliseconds connect_timeout{10'000};
  // A transfer that moves no byte for this long is abandoned (and retried).
  std::chrono::milliseconds stall_timeout{30'000};
  // Whole request, connect to last byte; 0 = no limit (large objects).
  std::chrono::milliseconds request_timeout{0};
  // Requests on the wire at once; more wait in the client's queue.
  int max_connections = 64;
  RetryPolicy retry;
  // https: check the server's certificate (system CAs, or ca_file).
  bool verify_tls = true;
  std::string ca_file;
  // Bandwidth caps (--limit-upload, --limit-download), shared by every
  // request of the client and by anything else given the same limiters.
  // Request bodies are charged on the submitting thread before they are
  // queued (a retry is not charged again); response bodies on the I/O
  // thread as they arrive, which holds every transfer of the client back
  // together. Null: no limit.
  std::shared_ptr<RateLimiter> upload_limit;
  std::shared_ptr<RateLimiter> download_limit;
};

// An endpoint URL split up. `host` keeps an explicit port ("h:7480").
struct Endpoint {
  std::string scheme;  // "http" or "https"
  std::string host;
};
Result<Endpoint> ParseEndpoint(std::string_view url);

// Where one request goes: the URL for curl, the Host header, and the raw
// path and query to sign (sigv4.h encodes them the same way as the URL).
struct RequestTarget {
  std::string url;
  std::string host;
  std::string path;  // raw, "/bucket/key" or "/key"
};
// `bucket` may be empty (service-level request); `key` may be empty
// (bucket-level request). InvalidArgument for a bucket name that cannot be
// used in a host name with virtual-host addressing.
Result<RequestTarget> BuildTarget(const Endpoint& endpoint, Addressing addressing,
                                  std::string_view bucket, std::string_view key,
                                  const Pairs& query);

// Parses the INI text of a credentials file and returns `profile`'s
// aws_access_key_id / aws_secret_access_key (/ aws_session_token).
// NotFound when the profile or a key is missing.
Result<Credentials> ParseCredentialsFile(std::string_view content, std::string_view profile,
                                         std::string_view file_name);

// Environment first, then the credentials file (read through `env`).
// `getenv` returns nullopt for unset variables (std::getenv in main()).
using GetEnvFn = std::function<std::optional<std::string>(const char* name)>;
Result<Credentials> LoadCredentials(const GetEnvFn& getenv, Env* env);

// The delay before retry number `retry` (1 = the first retry): exponential
// from base_delay, capped at max_delay, with "equal jitter": half fixed,
// half random from `random` (any 64-bit value), so retries of many
// requests that failed together spread out but none retries at once.
std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int retry, uint64_t random);

}  // namespace cairn::s3
