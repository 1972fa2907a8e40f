#include "s3/s3_config.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/text.h"

namespace cairn::s3 {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// A DNS label: what virtual-host addressing can put in front of the host.
bool IsDnsCompatibleBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.')) return false;
  }
  return b.front() != '-' && b.front() != '.' && b.back() != '-' && b.back() != '.';
}

}  // namespace

Result<Endpoint> ParseEndpoint(std::string_view url) {
  Endpoint ep;
  size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return InvalidArgumentError(fmt::format("S3 endpoint '{}': expected http://HOST[:PORT] or https://HOST[:PORT]", url));
  }
  ep.scheme = AsciiLower(url.substr(0, sep));
  if (ep.scheme != "http" && ep.scheme != "https") {
    return InvalidArgumentError(fmt::format("S3 endpoint '{}': scheme must be http or https", url));
  }
  std::string_view rest = url.substr(sep + 3);
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find_first_of("/?#@ ") != std::string_view::npos) {
    return InvalidArgumentError(fmt::format(
        "S3 endpoint '{}': expected only a host and port (no path, query or user)", url));
  }
  ep.host = std::string(rest);
  return ep;
}

Result<RequestTarget> BuildTarget(const Endpoint& endpoint, Addressing addressing,
                                  std::string_view bucket, std::string_view key,
                                  const Pairs& query) {
  RequestTarget t;
  if (addressing == Addressing::kVirtualHost && !bucket.empty()) {
    if (!IsDnsCompatibleBucket(bucket)) {
      return InvalidArgumentError(fmt::format(
          "S3 bucket '{}' cannot be used with virtual-host addressing (not a DNS label); use path style",
          bucket));
    }
    t.host = fmt::format("{}.{}", bucket, endpoint.host);
    t.path = fmt::format("/{}", key);
  } else {
    t.host = endpoint.host;
    t.path = bucket.empty() ? std::string("/")
             : key.empty()  ? fmt::format("/{}", bucket)
                            : fmt::format("/{}/{}", bucket, key);
  }
  t.url = fmt::format("{}://{}{}", endpoint.scheme, t.host, CanonicalUri(t.path));
  std::string q = CanonicalQuery(query);
  if (!q.empty()) t.url += "?" + q;
  return t;
}

Result<Credentials> ParseCredentialsFile(std::string_view content, std::string_view profile,
                                         std::string_view file_name) {
  Credentials c;
  bool in_profile = false, found = false;
  size_t line_no = 0;
  while (!content.empty()) {
    size_t nl = content.find('\n');
    std::string_view line = Trim(content.substr(0, nl));
    content = nl == std::string_view::npos ? std::string_view() : content.substr(nl + 1);
    ++line_no;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') {
        return InvalidArgumentError(fmt::format("{}:{}: unterminated section header", file_name, line_no));
      }
      std::string_view name = Trim(line.substr(1, line.size() - 2));
      // ~/.aws/config spells it "[profile NAME]"; accept that too.
      if (name.starts_with("profile ")) name = Trim(name.substr(8));
      in_profile = name == profile;
      found = found || in_profile;
      continue;
    }
    if (!in_profile) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;  // not a key line; the AWS CLI ignores it too
    std::string_view k = Trim(line.substr(0, eq));
    std::string_view v = Trim(line.substr(eq + 1));
    if (k == "aws_access_key_id") {
      c.access_key = std::string(v);
    } else if (k == "aws_secret_access_key") {
      c.secret_key = std::string(v);
    } else if (k == "aws_session_token") {
      c.session_token = std::string(v);
    }
  }
  if (!found) {
    return NotFoundError(fmt::format("S3 credentials: no profile [{}] in {}", profile, file_name));
  }
  if (c.access_key.empty() || c.secret_key.empty()) {
    return NotFoundError(fmt::format(
        "S3 credentials: profile [{}] in {} lacks aws_access_key_id or aws_secret_access_key",
        profile, file_name));
  }
  return c;
}

Result<Credentials> LoadCredentials(const GetEnvFn& getenv, Env* env) {
  auto get = [&](const char* name) { return getenv(name).value_or(""); };
  if (!get("AWS_ACCESS_KEY_ID").empty() || !get("AWS_SECRET_ACCESS_KEY").empty()) {
    Credentials c{get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY"), get("AWS_SESSION_TOKEN")};
    if (c.access_key.empty() || c.secret_key.empty()) {
      return InvalidArgumentError(
          "S3 credentials: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither");
    }
    return c;
  }
  std::string file = get("AWS_SHARED_CREDENTIALS_FILE");
  if (file.empty()) {
    std::string home = get("HOME");
    if (home.empty()) {
      return NotFoundError("S3 credentials: AWS_ACCESS_KEY_ID is not set and HOME is unknown");
    }
    file = home + "/.aws/credentials";
  }
  std::string profile = get("AWS_PROFILE");
  if (profile.empty()) profile = "default";
  auto opened = env->OpenReadable(file);
  if (!opened.ok()) {
    return NotFoundError(fmt::format(
        "S3 credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY not set and {} unreadable ({})",
        file, opened.status().message()));
  }
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, (*opened)->Size());
  if (size > (1u << 20)) return InvalidArgumentError(fmt::format("{}: too large for a credentials file", file));
  std::string text(size, '\0');
  CAIRN_ASSIGN_OR_RETURN(size_t n, (*opened)->ReadAt(0, std::span<uint8_t>(
                                                           reinterpret_cast<uint8_t*>(text.data()), size)));
  text.resize(n);
  return ParseCredentialsFile(text, profile, file);
}

std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int retry, uint64_t random) {
  int64_t cap = policy.max_delay.count();
  int64_t d = policy.base_delay.count();
  for (int i = 1; i < retry && d < cap; ++i) d *= 2;
  d = std::min(d, cap);
  int64_t half = d / 2;
  int64_t jitter = half > 0 ? static_cast<int64_t>(random % static_cast<uint64_t>(d - half + 1)) : 0;
  return std::chrono::milliseconds(half + jitter);
}

}  // namespace cairn::s3
