#include "server/web/dashboard.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>

#include "base/markup.h"
#include "protocol/messages.h"
#include "server/web/web_assets.h"

namespace cairn::server {
namespace {

constexpr size_t kFormBodyLimit = 4 << 10;
constexpr std::string_view kUiPrefix = "/ui/";

// Every dashboard answer: nothing from elsewhere runs or loads, the page is
// never framed, nothing is cached, no Referer leaves the server.
net::ResponseWriter::Headers SecurityHeaders() {
  return {{"Content-Security-Policy",
           "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"},
          {"X-Content-Type-Options", "nosniff"},
          {"X-Frame-Options", "DENY"},
          // "same-origin", not "no-referrer": under the latter a browser sends
          // "Origin: null" with the page's own form posts.
          {"Referrer-Policy", "same-origin"},
          {"Cache-Control", "no-store"}};
}

std::string Cookie(std::string_view name, std::string_view value, int64_t max_age) {
  return fmt::format("{}={}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age={}", name, value,
                     max_age);
}

std::string Header(const net::HttpRequest& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

bool ChangesState(std::string_view method) {
  return method != "GET" && method != "HEAD" && method != "OPTIONS";
}

// A browser names the page a request comes from in Origin: it must be this
// server, as the browser reached it. (No Origin: an older browser; the CSRF
// token still decides.)
bool SameOrigin(const net::HttpRequest& r) {
  std::string origin = Header(r, "origin");
  return origin.empty() || origin == "https://" + Header(r, "host");
}

}  // namespace

Dashboard::Dashboard(Env& env, Logger& logger, const TokenStore& tokens, AuditLog& audit,
                     LoginLimiter& logins, WebSessionLimits limits)
    : env_(env), logger_(logger), tokens_(tokens), audit_(audit), logins_(logins), sessions_(limits) {}

bool Dashboard::Serves(std::string_view path) { return path == "/" || path.starts_with(kUiPrefix); }

net::Admission Dashboard::Admit(const net::HttpRequest& h) {
  net::Admission a;
  if (h.method == "POST" && (h.path == "/ui/login" || h.path == "/ui/logout")) {
    a.max_body = kFormBodyLimit;
  }
  if (auto session = Current(h); session.ok()) {
    a.tenant = session->token.name;
    a.authenticated = true;
  }
  return a;
}

Result<WebSession> Dashboard::Current(const net::HttpRequest& r) {
  auto value = CookieValue(Header(r, "cookie"), kSessionCookie);
  if (!value) return UnauthenticatedError("not logged in");
  CAIRN_ASSIGN_OR_RETURN(WebSession session, sessions_.Find(*value, env_.NowUnixSeconds()));
  // The token as it is now: revoked, or made again under the same name, it
  // ends the session (the token store is the one authority on tokens).
  for (const Token& t : tokens_.List()) {
    if (t.name == session.token.name && t.store == session.token.store &&
        t.role == session.token.role && t.created == session.token.created) {
      return session;
    }
  }
  sessions_.RemoveToken(session.token.name);
  return UnauthenticatedError(
      fmt::format("token '{}' was revoked or changed: log in again", session.token.name));
}

std::optional<Result<Token>> Dashboard::SessionToken(const net::HttpRequest& r) {
  if (!CookieValue(Header(r, "cookie"), kSessionCookie)) return std::nullopt;
  auto session = Current(r);
  if (!session.ok()) return Result<Token>(session.status());
  if (ChangesState(r.method)) {
    if (!SameOrigin(r)) {
      return Result<Token>(PermissionDeniedError(
          fmt::format("cross-origin request refused (Origin {})", PrintableName(Header(r, "origin")))));
    }
    if (!CsrfMatches(*session, Header(r, kCsrfHeader))) {
      return Result<Token>(
          PermissionDeniedError("missing or wrong X-CSRF-Token: reload the dashboard"));
    }
  }
  return session->token;
}

void Dashboard::Refuse(const net::HttpRequest& r, std::string_view token, int status,
                       std::string_view reason) {
  audit_.Record({r.peer, std::string(token), r.method, r.path, status, std::string(reason)});
}

void Dashboard::Handle(const net::HttpRequest& r, net::ResponseWriter& w) {
  net::ResponseWriter::Headers headers = SecurityHeaders();
  auto session = Current(r);
  if (r.path == "/ui/login") {
    if (r.method == "POST") return Login(r, w);
    if (r.method != "GET") return w.Send(405, "text/plain; charset=utf-8", AsBytes("GET or POST\n"), headers);
    if (session.ok()) {
      headers.emplace_back("Location", "/");
      return w.Send(303, "text/plain; charset=utf-8", AsBytes("logged in\n"), headers);
    }
    return LoginPage(r, w, 200, "");
  }
  if (r.path == "/ui/logout") return Logout(r, w);
  if (r.method != "GET") {
    return w.Send(405, "text/plain; charset=utf-8", AsBytes("this resource takes GET\n"), headers);
  }
  if (r.path == "/") {
    if (!session.ok()) {
      headers.emplace_back("Location", "/ui/login");
      return w.Send(303, "text/plain; charset=utf-8", AsBytes("log in at /ui/login\n"), headers);
    }
    const WebAsset* page = FindWebAsset("index.html");
    return w.Send(200, page->content_type, AsBytes(page->data), headers);
  }
  if (r.path == "/ui/session") {
    if (!session.ok()) {
      return w.Send(401, "application/json", AsBytes(protocol::ErrorBody(session.status().message())),
                    headers);
    }
    nlohmann::json body = {{"token", session->token.name},
                           {"role", RoleName(session->token.role)},
                           {"store", session->token.store},
                           {"csrf", session->csrf},
                           {"idle_s", sessions_.limits().idle_s}};
    return w.Send(200, "application/json", AsBytes(body.dump()), headers);
  }
  std::string_view name = std::string_view(r.path).substr(kUiPrefix.size());
  const WebAsset* asset = name.ends_with(".html") ? nullptr : FindWebAsset(name);
  if (asset == nullptr) {
    return w.Send(404, "text/plain; charset=utf-8", AsBytes("no such page\n"), headers);
  }
  w.Send(200, asset->content_type, AsBytes(asset->data), headers);
}

void Dashboard::LoginPage(const net::HttpRequest&, net::ResponseWriter& w, int status,
                          std::string_view error, net::ResponseWriter::Headers extra) {
  // A fresh double-submit token with each form: the cookie and the hidden
  // field must match at POST, which a page of another site cannot arrange.
  const std::string csrf = NewRandomHex();
  std::string page(FindWebAsset("login.html")->data);
  auto replace = [&page](std::string_view key, const std::string& value) {
    for (size_t at; (at = page.find(key)) != std::string::npos;) page.replace(at, key.size(), value);
  };
  replace("{{csrf}}", csrf);
  replace("{{error}}", error.empty() ? "" : "<p class=\"error\" id=\"login-error\">" + EscapeMarkup(error) + "</p>");
  net::ResponseWriter::Headers headers = SecurityHeaders();
  headers.emplace_back("Set-Cookie", Cookie(kLoginCookie, csrf, 3600));
  for (auto& h : extra) headers.push_back(std::move(h));
  w.Send(status, "text/html; charset=utf-8", AsBytes(page), headers);
}

void Dashboard::Login(const net::HttpRequest& r, net::ResponseWriter& w) {
  if (int64_t wait = logins_.RetryAfter(r.peer_address); wait > 0) {
    std::string message =
        fmt::format("too many failed logins from {}: try again in {} s", r.peer_address, wait);
    Refuse(r, "", 429, message);
    return LoginPage(r, w, 429, message, {{"Retry-After", std::to_string(wait)}});
  }
  std::map<std::string, std::string> form;
  if (!ParseForm(AsStringView(r.body), &form)) {
    return LoginPage(r, w, 400, "the login form's body is malformed");
  }
  const std::string credential = form["token"];
  const std::string name = PrintableName(credential.substr(0, credential.find(':')));
  auto cookie = CookieValue(Header(r, "cookie"), kLoginCookie);
  std::string_view refused = !cookie || cookie->empty() ? "login form without its CSRF cookie"
                             : !CsrfMatches(WebSession{Token{}, *cookie, 0, 0}, form["csrf"])
                                 ? "login form with a CSRF token that is not its cookie's"
                             : !SameOrigin(r) ? "login form posted from another origin"
                                              : "";
  if (!refused.empty()) {
    Refuse(r, name, 403, fmt::format("{} (Origin '{}', Host '{}')", refused,
                                     PrintableName(Header(r, "origin")),
                                     PrintableName(Header(r, "host"))));
    return LoginPage(r, w, 403, "the login form expired: try again");
  }
  std::string why;
  auto token = tokens_.Authenticate(credential, &why);
  if (!token.ok()) {
    logins_.Failed(r.peer_address);
    Refuse(r, name, 401, "dashboard login: " + why);
    return LoginPage(r, w, 401, "invalid token");
  }
  WebSessions::Created created = sessions_.Create(*token, env_.NowUnixSeconds());
  logger_.Info("{}: token '{}' (role {}) logged in to the dashboard", r.peer, token->name,
               RoleName(token->role));
  net::ResponseWriter::Headers headers = SecurityHeaders();
  headers.emplace_back("Set-Cookie", Cookie(kSessionCookie, created.id, sessions_.limits().max_age_s));
  headers.emplace_back("Set-Cookie", Cookie(kLoginCookie, "", 0));
  headers.emplace_back("Location", "/");
  w.Send(303, "text/plain; charset=utf-8", AsBytes("logged in\n"), headers);
}

void Dashboard::Logout(const net::HttpRequest& r, net::ResponseWriter& w) {
  net::ResponseWriter::Headers headers = SecurityHeaders();
  if (r.method != "POST") {
    return w.Send(405, "text/plain; charset=utf-8", AsBytes("logout takes POST\n"), headers);
  }
  auto session = Current(r);
  if (session.ok()) {
    std::map<std::string, std::string> form;
    std::string presented = Header(r, kCsrfHeader);
    if (presented.empty() && ParseForm(AsStringView(r.body), &form)) presented = form["csrf"];
    if (!SameOrigin(r) || !CsrfMatches(*session, presented)) {
      Refuse(r, session->token.name, 403, "logout without the session's CSRF token");
      return w.Send(403, "text/plain; charset=utf-8", AsBytes("missing or wrong CSRF token\n"),
                    headers);
    }
    sessions_.Remove(*CookieValue(Header(r, "cookie"), kSessionCookie));
  }
  headers.emplace_back("Set-Cookie", Cookie(kSessionCookie, "", 0));
  headers.emplace_back("Location", "/ui/login");
  w.Send(303, "text/plain; charset=utf-8", AsBytes("logged out\n"), headers);
}

}  // namespace cairn::server
