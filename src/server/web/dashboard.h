// The web dashboard of `cairn serve` (docs/SERVER.md, "Web dashboard"):
// served at "/" and "/ui/…" over the server's TLS, beside the API.
//
// The dashboard is a page of vanilla JavaScript (src/server/web/assets/,
// compiled into the binary) that talks to the ordinary API (/api/v1/…)
// with a session cookie in place of a Bearer token: every answer it shows
// and every action it takes goes through the same token, role, datastore
// and group checks as the CLI's requests (server::Api), so a token sees and
// does in the browser exactly what it may with the CLI. This class owns
// only what a browser needs besides:
//   GET  /             the page (303 to /ui/login without a session)
//   GET  /ui/login     the login form (sets the form's double-submit cookie)
//   POST /ui/login     token=NAME:SECRET&csrf=…: a session, 303 to /
//   POST /ui/logout    ends the session (CSRF token required)
//   GET  /ui/session   {token, role, store, csrf, idle_s}
//   GET  /ui/NAME      the embedded assets (app.js, app.css, icon.svg)
// Failed logins count against the client's address in the server's
// LoginLimiter (shared with Bearer logins) and go to the audit log with the
// peer's address.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/env.h"
#include "base/logging.h"
#include "net/http_server.h"
#include "server/audit_log.h"
#include "server/tokens.h"
#include "server/web/web_session.h"

namespace cairn::server {

class Dashboard {
 public:
  // REQUIRES: all references outlive the dashboard.
  Dashboard(Env& env, Logger& logger, const TokenStore& tokens, AuditLog& audit,
            LoginLimiter& logins, WebSessionLimits limits = {});

  // True for the paths this class answers ("/", "/ui/…").
  static bool Serves(std::string_view path);

  // The header step for those paths: small bodies for the forms, none else.
  net::Admission Admit(const net::HttpRequest& header);
  void Handle(const net::HttpRequest& request, net::ResponseWriter& response);

  // For an API request without an Authorization header: nullopt when it
  // carries no session cookie either; else the session's token, or
  // Unauthenticated (unknown or expired session, token revoked or changed)
  // or PermissionDenied (a state-changing request without the session's
  // CSRF token, or from another origin).
  std::optional<Result<Token>> SessionToken(const net::HttpRequest& request);

  WebSessions& sessions() { return sessions_; }

 private:
  // The request's live session: found, not expired, its token unchanged.
  Result<WebSession> Current(const net::HttpRequest& request);
  void Login(const net::HttpRequest& request, net::ResponseWriter& response);
  void Logout(const net::HttpRequest& request, net::ResponseWriter& response);
  void LoginPage(const net::HttpRequest& request, net::ResponseWriter& response, int status,
                 std::string_view error, net::ResponseWriter::Headers extra = {});
  void Refuse(const net::HttpRequest& request, std::string_view token, int status,
              std::string_view reason);

  Env& env_;
  Logger& logger_;
  const TokenStore& tokens_;
  AuditLog& audit_;
  LoginLimiter& logins_;
  WebSessions sessions_;
};

}  // namespace cairn::server
