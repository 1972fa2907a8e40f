// Where an object-store datastore lives: `s3://BUCKET[/PREFIX][?OPTIONS]`.
//
// Options (query parameters; values may be percent-encoded):
//   endpoint=URL     http://127.0.0.1:7480, https://s3.example.com (default:
//                    $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS's
//                    https://s3.REGION.amazonaws.com)
//   region=NAME      default $AWS_REGION, $AWS_DEFAULT_REGION, else us-east-1
//   style=path|virtual   addressing (default path: what Ceph RGW, Swift and
//                    any endpoint given by IP need)
// Credentials come from the environment or the credentials file
// (s3/s3_config.h, LoadCredentials).
//
// Thread safety: value types and pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "s3/s3_config.h"

namespace cairn::s3store {

inline constexpr std::string_view kS3Scheme = "s3://";

struct S3Location {
  s3::S3Config config;  // endpoint, region, bucket, addressing (no credentials)
  std::string prefix;   // "" or "a/b" (no leading or trailing slash)

  // Key of `rel` ("index.json.blob", ".chunks/abc/…") under the prefix.
  std::string Key(std::string_view rel) const;
  // "s3://bucket/prefix", for messages.
  std::string Display() const;
};

bool IsS3Url(std::string_view url);

// Parses `url`. InvalidArgument, saying what is wrong, for a bad bucket
// name, prefix (empty, "." or ".." components), option or endpoint.
Result<S3Location> ParseS3Url(std::string_view url, const s3::GetEnvFn& getenv);

// The URL, its options and the credentials from `getenv` and `env` (the
// credentials file): everything a command needs to talk to the store.
Result<S3Location> ResolveS3Url(std::string_view url, const s3::GetEnvFn& getenv, Env* env);

}  // namespace cairn::s3store
