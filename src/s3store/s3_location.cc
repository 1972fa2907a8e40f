#include "s3store/s3_location.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "base/text.h"

namespace cairn::s3store {
namespace {

Result<std::string> DecodePart(std::string_view s, std::string_view url) {
  std::optional<std::string> out = PercentDecode(s);
  if (!out) return InvalidArgumentError(fmt::format("{}: bad percent-encoding in '{}'", url, s));
  return std::move(*out);
}

// S3's rules for a bucket name that works everywhere (and in a host name).
bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'; };
  if (!std::all_of(b.begin(), b.end(), ok)) return false;
  auto alnum = [](char c) { return c != '-' && c != '.'; };
  return alnum(b.front()) && alnum(b.back()) && b.find("..") == std::string_view::npos;
}

std::optional<std::string> Get(const s3::GetEnvFn& getenv, const char* name) {
  auto v = getenv(name);
  if (v && v->empty()) return std::nullopt;
  return v;
}

}  // namespace

std::string S3Location::Key(std::string_view rel) const {
  return prefix.empty() ? std::string(rel) : fmt::format("{}/{}", prefix, rel);
}

std::string S3Location::Display() const {
  return prefix.empty() ? fmt::format("s3://{}", config.bucket)
                        : fmt::format("s3://{}/{}", config.bucket, prefix);
}

bool IsS3Url(std::string_view url) { return url.starts_with(kS3Scheme); }

Result<S3Location> ParseS3Url(std::string_view url, const s3::GetEnvFn& getenv) {
  if (!IsS3Url(url)) return InvalidArgumentError(fmt::format("{}: not an s3:// URL", url));
  std::string_view rest = url.substr(kS3Scheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  S3Location loc;
  size_t slash = rest.find('/');
  loc.config.bucket = std::string(rest.substr(0, slash));
  if (!ValidBucket(loc.config.bucket)) {
    return InvalidArgumentError(fmt::format(
        "{}: bucket name '{}' must be 3 to 63 lowercase letters, digits, '-' and '.'", url,
        loc.config.bucket));
  }
  std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  while (prefix.ends_with('/')) prefix.remove_suffix(1);
  if (!prefix.empty()) {
    CAIRN_ASSIGN_OR_RETURN(loc.prefix, DecodePart(prefix, url));
    size_t start = 0;
    while (start <= loc.prefix.size()) {
      size_t end = std::min(loc.prefix.find('/', start), loc.prefix.size());
      std::string_view part = std::string_view(loc.prefix).substr(start, end - start);
      if (part.empty() || part == "." || part == ".." || part.starts_with('.')) {
        return InvalidArgumentError(fmt::format(
            "{}: prefix '{}' has an empty, '.' or '..' part, or a part starting with '.'", url,
            loc.prefix));
      }
      start = end + 1;
    }
  }

  std::string endpoint, region, style;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view name = pair.substr(0, eq);
    CAIRN_ASSIGN_OR_RETURN(std::string value,
                           DecodePart(eq == std::string_view::npos ? "" : pair.substr(eq + 1), url));
    if (name == "endpoint") {
      endpoint = value;
    } else if (name == "region") {
      region = value;
    } else if (name == "style") {
      style = value;
    } else {
      return InvalidArgumentError(fmt::format(
          "{}: unknown option '{}' (known: endpoint, region, style)", url, name));
    }
  }
  if (region.empty()) region = Get(getenv, "AWS_REGION").value_or(Get(getenv, "AWS_DEFAULT_REGION").value_or("us-east-1"));
  if (endpoint.empty()) {
    endpoint = Get(getenv, "AWS_ENDPOINT_URL_S3")
                   .value_or(Get(getenv, "AWS_ENDPOINT_URL")
                                 .value_or(fmt::format("https://s3.{}.amazonaws.com", region)));
  }
  while (endpoint.ends_with('/')) endpoint.pop_back();
  if (style.empty() || style == "path") {
    loc.config.addressing = s3::Addressing::kPathStyle;
  } else if (style == "virtual") {
    loc.config.addressing = s3::Addressing::kVirtualHost;
  } else {
    return InvalidArgumentError(fmt::format("{}: style '{}' must be path or virtual", url, style));
  }
  auto parsed = s3::ParseEndpoint(endpoint);
  if (!parsed.ok()) return parsed.status().WithContext(std::string(url));
  loc.config.endpoint = endpoint;
  loc.config.region = region;
  return loc;
}

Result<S3Location> ResolveS3Url(std::string_view url, const s3::GetEnvFn& getenv, Env* env) {
  CAIRN_ASSIGN_OR_RETURN(S3Location loc, ParseS3Url(url, getenv));
  auto creds = s3::LoadCredentials(getenv, env);
  if (!creds.ok()) {
    return creds.status().WithContext(fmt::format(
        "{}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile "
        "in ~/.aws/credentials)",
        loc.Display()));
  }
  loc.config.credentials = std::move(*creds);
  return loc;
}

}  // namespace cairn::s3store
