// The dashboard's sessions (docs/SERVER.md, "Web dashboard"): what a login
// with a token buys a browser, and the small parsers the dashboard's
// requests need.
//
// A session is named by 32 random bytes (64 hex digits) that live only in
// the browser's `__Host-cairn_session` cookie (HttpOnly, Secure,
// SameSite=Strict); the table keeps SHA-256 of the id, so neither a lookup's
// timing nor a look at the server's memory gives out a usable id. Each
// session holds the token it was made for (name, datastore, role, creation
// time: the dashboard checks on every request that the token still exists
// unchanged, so `cairn token revoke` ends its sessions) and a CSRF token of
// its own, which every state-changing request must carry in the
// X-CSRF-Token header (compared in constant time). A session ends after
// `idle_s` without a request, `max_age_s` after the login, or at logout; past
// `max_sessions` the least recently used one is dropped.
//
// Thread safety: WebSessions' methods may be called concurrently; the
// functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/mutex.h"
#include "base/status.h"
#include "server/tokens.h"

namespace cairn::server {

inline constexpr char kSessionCookie[] = "__Host-cairn_session";
// The login form's double-submit cookie (a CSRF token before any session).
inline constexpr char kLoginCookie[] = "__Host-cairn_login";
inline constexpr char kCsrfHeader[] = "x-csrf-token";

struct WebSessionLimits {
  int64_t idle_s = 30 * 60;
  int64_t max_age_s = 12 * 3600;
  size_t max_sessions = 4096;
};

struct WebSession {
  Token token;  // as it was at the login
  std::string csrf;  // 64 hex digits
  int64_t created = 0;    // unix seconds
  int64_t last_used = 0;  // unix seconds
};

class WebSessions {
 public:
  explicit WebSessions(WebSessionLimits limits = {}) : limits_(limits) {}

  struct Created {
    std::string id;  // the cookie's value: shown once, never kept
    std::string csrf;
  };
  Created Create(const Token& token, int64_t now);
  // The session named by cookie value `id`, its last use set to `now`.
  // Unauthenticated for an unknown, malformed or expired id (an expired one
  // is removed).
  Result<WebSession> Find(std::string_view id, int64_t now);
  // Ends the session (logout); an unknown id is fine.
  void Remove(std::string_view id);
  // Ends every session of token `name` (the token changed or is gone).
  void RemoveToken(std::string_view name);
  size_t size() const;
  const WebSessionLimits& limits() const { return limits_; }

 private:
  void ExpireLocked(int64_t now) REQUIRES(mu_);
  const WebSessionLimits limits_;
  mutable Mutex mu_;
  std::map<std::string, WebSession> sessions_ GUARDED_BY(mu_);  // SHA-256(id) hex → session
};

// 32 random bytes as 64 lowercase hex digits.
std::string NewRandomHex();
// Constant-time comparison of a presented CSRF token with the session's.
bool CsrfMatches(const WebSession& session, std::string_view presented);
// The value of cookie `name` in a Cookie header ("a=1; b=2"); nullopt
// when it is not there.
std::optional<std::string> CookieValue(std::string_view header, std::string_view name);
// The fields of an application/x-www-form-urlencoded body ("+" is a space,
// %XX decoded; a repeated name keeps its last value). False when the body
// is malformed (a broken escape, a NUL).
bool ParseForm(std::string_view body, std::map<std::string, std::string>* fields);

}  // namespace cairn::server
