#include "server/web/web_session.h"

#include <array>
#include <vector>

#include "base/bytes.h"
#include "crypto/crypt_config.h"
#include "crypto/sha256.h"
#include "net/http_server.h"

namespace cairn::server {
namespace {

std::string IdKey(std::string_view id) { return crypto::DigestHex(crypto::Sha256(AsBytes(id))); }

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

std::string NewRandomHex() {
  std::array<uint8_t, 32> bytes{};
  crypto::RandomBytes(bytes);
  return ToHex(bytes);
}

WebSessions::Created WebSessions::Create(const Token& token, int64_t now) {
  Created out{NewRandomHex(), NewRandomHex()};
  MutexLock lock(mu_);
  ExpireLocked(now);
  while (!sessions_.empty() && sessions_.size() >= limits_.max_sessions) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (it->second.last_used < oldest->second.last_used) oldest = it;
    }
    sessions_.erase(oldest);
  }
  sessions_[IdKey(out.id)] = WebSession{token, out.csrf, now, now};
  return out;
}

Result<WebSession> WebSessions::Find(std::string_view id, int64_t now) {
  if (!IsHex64(id)) return UnauthenticatedError("malformed session cookie");
  MutexLock lock(mu_);
  auto it = sessions_.find(IdKey(id));
  if (it == sessions_.end()) return UnauthenticatedError("no such session (logged out or expired)");
  WebSession& s = it->second;
  if (now - s.last_used > limits_.idle_s || now - s.created > limits_.max_age_s) {
    sessions_.erase(it);
    return UnauthenticatedError("the session expired");
  }
  s.last_used = now;
  return s;
}

void WebSessions::Remove(std::string_view id) {
  MutexLock lock(mu_);
  sessions_.erase(IdKey(id));
}

void WebSessions::RemoveToken(std::string_view name) {
  MutexLock lock(mu_);
  std::erase_if(sessions_, [&](const auto& kv) { return kv.second.token.name == name; });
}

size_t WebSessions::size() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

void WebSessions::ExpireLocked(int64_t now) {
  std::erase_if(sessions_, [&](const auto& kv) {
    return now - kv.second.last_used > limits_.idle_s || now - kv.second.created > limits_.max_age_s;
  });
}

bool CsrfMatches(const WebSession& session, std::string_view presented) {
  return !session.csrf.empty() && crypto::ConstantTimeEqual(AsBytes(session.csrf), AsBytes(presented));
}

std::optional<std::string> CookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return std::string(value);
  }
  return std::nullopt;
}

bool ParseForm(std::string_view body, std::map<std::string, std::string>* fields) {
  // The same decoding as a request's query string (net/http_server.h).
  std::string path;
  return net::DecodeRequestTarget("/?" + std::string(body), &path, fields);
}

}  // namespace cairn::server
