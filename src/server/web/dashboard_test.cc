#include "server/web/dashboard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "datastore/datastore.h"
#include "maintenance/prune.h"
#include "server/api.h"
#include "server/web/web_session.h"
#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

// --- the session table --------------------------------------------------

Token TestToken(std::string name = "alice", Role role = Role::kAdmin) {
  return Token{std::move(name), "*", role, 1000};
}

TEST(WebSessionsTest, ASessionIsFoundByItsIdOnlyAndCarriesItsToken) {
  WebSessions table;
  auto s = table.Create(TestToken(), 100);
  EXPECT_EQ(s.id.size(), 64u);
  EXPECT_EQ(s.csrf.size(), 64u);
  EXPECT_NE(s.id, s.csrf);
  auto found = table.Find(s.id, 101);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->token.name, "alice");
  EXPECT_EQ(found->csrf, s.csrf);
  // Another id, a malformed one, the CSRF token as an id: nothing.
  EXPECT_EQ(table.Find(NewRandomHex(), 101).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(table.Find("x", 101).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(table.Find(s.csrf, 101).status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(table.Find(s.id.substr(0, 63) + "g", 101).status().code(), StatusCode::kUnauthenticated);
}

TEST(WebSessionsTest, SessionsExpireWhenIdleAndAtTheirMaximumAge) {
  WebSessions table(WebSessionLimits{/*idle_s=*/60, /*max_age_s=*/300, /*max_sessions=*/10});
  auto s = table.Create(TestToken(), 1000);
  EXPECT_TRUE(table.Find(s.id, 1060).ok());  // idle for exactly the limit: still valid
  EXPECT_TRUE(table.Find(s.id, 1120).ok());  // each use restarts the idle clock
  EXPECT_FALSE(table.Find(s.id, 1181).ok()); // idle past the limit
  EXPECT_EQ(table.size(), 0u);               // and removed

  auto busy = table.Create(TestToken(), 2000);
  for (int64_t t = 2050; t <= 2300; t += 50) EXPECT_TRUE(table.Find(busy.id, t).ok()) << t;
  EXPECT_FALSE(table.Find(busy.id, 2301).ok());  // used all along, but past max_age
}

TEST(WebSessionsTest, LogoutRevocationAndTheLimitEndSessions) {
  WebSessions table(WebSessionLimits{60, 300, /*max_sessions=*/2});
  auto a = table.Create(TestToken("a"), 10);
  auto b = table.Create(TestToken("b"), 11);
  ASSERT_TRUE(table.Find(a.id, 12).ok());  // a is now the most recently used
  auto c = table.Create(TestToken("c"), 13);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_FALSE(table.Find(b.id, 14).ok());  // the least recently used went
  EXPECT_TRUE(table.Find(a.id, 14).ok());
  table.Remove(a.id);
  EXPECT_FALSE(table.Find(a.id, 15).ok());
  table.RemoveToken("c");
  EXPECT_FALSE(table.Find(c.id, 15).ok());
  EXPECT_EQ(table.size(), 0u);
}

TEST(WebSessionsTest, CsrfTokenMustMatchExactly) {
  WebSession s{TestToken(), NewRandomHex(), 0, 0};
  EXPECT_TRUE(CsrfMatches(s, s.csrf));
  EXPECT_FALSE(CsrfMatches(s, ""));
  EXPECT_FALSE(CsrfMatches(s, s.csrf.substr(1)));
  EXPECT_FALSE(CsrfMatches(s, s.csrf + "0"));
  std::string flipped = s.csrf;
  flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
  EXPECT_FALSE(CsrfMatches(s, flipped));
  WebSession none{TestToken(), "", 0, 0};
  EXPECT_FALSE(CsrfMatches(none, ""));  // no token is never a match
}

TEST(WebSessionsTest, CookieAndFormParsing) {
  EXPECT_EQ(CookieValue("a=1; __Host-cairn_session=abc; b=2", kSessionCookie), "abc");
  EXPECT_EQ(CookieValue("__Host-cairn_session=\"q\"", kSessionCookie), "q");
  EXPECT_EQ(CookieValue("x__Host-cairn_session=abc", kSessionCookie), std::nullopt);
  EXPECT_EQ(CookieValue("", kSessionCookie), std::nullopt);
  EXPECT_EQ(CookieValue(";;=;a", kSessionCookie), std::nullopt);
  std::map<std::string, std::string> form;
  ASSERT_TRUE(ParseForm("token=web%3Aab+cd&csrf=x&csrf=y", &form));
  EXPECT_EQ(form["token"], "web:ab cd");
  EXPECT_EQ(form["csrf"], "y");
  EXPECT_FALSE(ParseForm("token=%zz", &form));
  EXPECT_FALSE(ParseForm("token=%00", &form));
  EXPECT_TRUE(ParseForm("", &form));
  EXPECT_TRUE(form.empty());
}

// --- the dashboard behind the API ------------------------------------------

// Records one answer, as the server would send it.
class Answer final : public net::ResponseWriter {
 public:
  void Send(int s, std::string_view type, Bytes b, const Headers& h) override {
    status = s;
    content_type = type;
    body = std::string(AsStringView(b));
    headers = h;
  }
  void Stream(int s, std::string_view, Producer) override { status = s; }
  bool responded() const override { return status != 0; }
  std::string Header(std::string_view name) const {
    std::string all;
    for (const auto& [n, v] : headers) {
      if (n == name) all += (all.empty() ? "" : "\n") + v;
    }
    return all;
  }
  int status = 0;
  std::string content_type, body;
  Headers headers;
};

class DashboardApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = NewPosixEnv();
    logger_ = NewNullLogger();
    std::map<std::string, std::unique_ptr<datastore::Datastore>> stores;
    for (const char* name : {"main", "other"}) {
      ASSERT_TRUE(datastore::Datastore::Init(*env_, dir_.Join(name)).ok());
      auto ds = datastore::Datastore::Open(*env_, dir_.Join(name));
      ASSERT_TRUE(ds.ok());
      stores[name] = std::move(*ds);
    }
    // A snapshot exists once its manifest does.
    snap_dir_ = dir_.Join("main/vm/100/2026-01-01T00:00:00Z");
    std::filesystem::create_directories(snap_dir_);
    ASSERT_TRUE(WriteFileAtomic(*env_, snap_dir_ + "/index.json.blob", AsBytes(std::string("m"))).ok());
    std::filesystem::create_directories(dir_.Join("state"));
    auto tokens = TokenStore::Open(dir_.Join("state"));
    ASSERT_TRUE(tokens.ok());
    tokens_ = std::move(*tokens);
    admin_ = *tokens_->Create("boss", "*", Role::kAdmin);
    reader_ = *tokens_->Create("viewer", "main", Role::kReader);
    ApiOptions options;
    options.state_dir = dir_.Join("state");
    options.max_failed_logins_per_minute = 3;
    api_ = std::make_unique<Api>(*env_, *logger_, *tokens_, std::move(stores), options);
  }

  Answer Call(const std::string& method, const std::string& target, const std::string& body = "",
              std::map<std::string, std::string> headers = {}) {
    net::HttpRequest r;
    r.method = method;
    r.target = target;
    EXPECT_TRUE(net::DecodeRequestTarget(target, &r.path, &r.query));
    headers.emplace("host", "127.0.0.1:8007");
    r.headers = std::move(headers);
    r.body = Bytes(body.begin(), body.end());
    r.peer = "192.0.2.7:5555";
    r.peer_address = "192.0.2.7";
    Answer a;
    net::Admission admission = api_->Admit(r);
    if (admission.status != 0) {
      a.status = admission.status;
      a.body = admission.body;
      return a;
    }
    EXPECT_LE(r.body.size(), admission.max_body) << target;
    api_->Handle(r, a);
    return a;
  }

  // Logs in with `credential`; the session's cookie header and CSRF token.
  struct Login {
    int status = 0;
    std::string cookie, csrf, set_cookie;
  };
  Login LogIn(const std::string& credential) {
    Answer form = Call("GET", "/ui/login");
    EXPECT_EQ(form.status, 200);
    std::string login_cookie = form.Header("Set-Cookie");
    std::string value = login_cookie.substr(0, login_cookie.find(';'));  // "__Host-cairn_login=…"
    std::string csrf = value.substr(value.find('=') + 1);
    EXPECT_NE(form.body.find("value=\"" + csrf + "\""), std::string::npos);
    Answer a = Call("POST", "/ui/login", "token=" + credential + "&csrf=" + csrf,
                    {{"cookie", value}, {"origin", "https://127.0.0.1:8007"}});
    Login out;
    out.status = a.status;
    out.set_cookie = a.Header("Set-Cookie");
    if (a.status != 303) return out;
    std::string first = out.set_cookie.substr(0, out.set_cookie.find(';'));
    out.cookie = first;
    Answer session = Call("GET", "/ui/session", "", {{"cookie", out.cookie}});
    EXPECT_EQ(session.status, 200);
    out.csrf = nlohmann::json::parse(session.body)["csrf"];
    return out;
  }

  test_util::TempDir dir_;
  std::unique_ptr<Env> env_;
  std::unique_ptr<Logger> logger_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<Api> api_;
  std::string admin_, reader_, snap_dir_;
};

TEST_F(DashboardApiTest, LoginSetsAHardenedSessionCookieAndThePageNeedsIt) {
  Answer page = Call("GET", "/");
  EXPECT_EQ(page.status, 303);
  EXPECT_EQ(page.Header("Location"), "/ui/login");
  EXPECT_NE(page.Header("Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  Login login = LogIn(admin_);
  ASSERT_EQ(login.status, 303);
  EXPECT_TRUE(login.cookie.starts_with(std::string(kSessionCookie) + "="));
  for (const char* attribute : {"; Path=/", "; Secure", "; HttpOnly", "; SameSite=Strict"}) {
    EXPECT_NE(login.set_cookie.find(attribute), std::string::npos) << attribute;
  }
  EXPECT_EQ(login.set_cookie.find("Domain"), std::string::npos);  // a __Host- cookie has none
  page = Call("GET", "/", "", {{"cookie", login.cookie}});
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("/ui/app.js"), std::string::npos);
  EXPECT_EQ(Call("GET", "/ui/app.js").status, 200);
  EXPECT_EQ(Call("GET", "/ui/nothing.js").status, 404);
  EXPECT_EQ(Call("GET", "/ui/login.html").status, 404);  // a template, not an asset
}

TEST_F(DashboardApiTest, BadLoginsAreRefusedAuditedWithThePeerAndRateLimited) {
  EXPECT_EQ(LogIn("boss:" + std::string(64, '0')).status, 401);
  EXPECT_EQ(LogIn("nobody:x").status, 401);
  std::string audit(AsStringView(test_util::ReadFileOrFail(dir_.Join("state/audit.log"))));
  EXPECT_NE(audit.find("192.0.2.7:5555"), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"/ui/login\""), std::string::npos) << audit;
  EXPECT_NE(audit.find("\"boss\""), std::string::npos) << audit;
  EXPECT_EQ(audit.find(std::string(64, '0')), std::string::npos);  // never the secret
  EXPECT_EQ(LogIn("boss:bad").status, 401);
  // The third failure locked the address out: even the right token waits.
  EXPECT_EQ(LogIn(admin_).status, 429);
  // So does the API with a Bearer token from that address (one limiter).
  EXPECT_EQ(Call("GET", "/api/v1/stores", "", {{"authorization", "Bearer " + admin_}}).status, 429);
}

TEST_F(DashboardApiTest, LoginFormNeedsItsCsrfCookie) {
  Answer form = Call("GET", "/ui/login");
  std::string set = form.Header("Set-Cookie");
  std::string csrf = set.substr(set.find('=') + 1, 64);
  // No cookie (a form posted from another site), or another value.
  EXPECT_EQ(Call("POST", "/ui/login", "token=" + admin_ + "&csrf=" + csrf).status, 403);
  EXPECT_EQ(Call("POST", "/ui/login", "token=" + admin_ + "&csrf=" + NewRandomHex(),
                 {{"cookie", std::string(kLoginCookie) + "=" + csrf}})
                .status,
            403);
  EXPECT_EQ(Call("POST", "/ui/login", "token=" + admin_ + "&csrf=" + csrf,
                 {{"cookie", std::string(kLoginCookie) + "=" + csrf},
                  {"origin", "https://evil.example"}})
                .status,
            403);
  EXPECT_EQ(Call("POST", "/ui/login", "token=%zz", {}).status, 400);
}

TEST_F(DashboardApiTest, TheApiTakesTheSessionWithCsrfOnChanges) {
  Login login = LogIn(admin_);
  ASSERT_EQ(login.status, 303);
  const std::string protect = "/api/v1/stores/main/protected?snapshot=vm/100/2026-01-01T00:00:00Z";
  Answer stores = Call("GET", "/api/v1/stores", "", {{"cookie", login.cookie}});
  ASSERT_EQ(stores.status, 200);
  EXPECT_EQ(nlohmann::json::parse(stores.body)["stores"], nlohmann::json({"main", "other"}));
  // A change without the CSRF token, with a wrong one, or from another origin.
  EXPECT_EQ(Call("PUT", protect, R"({"protected": true})", {{"cookie", login.cookie}}).status, 403);
  EXPECT_EQ(Call("PUT", protect, R"({"protected": true})",
                 {{"cookie", login.cookie}, {"x-csrf-token", NewRandomHex()}})
                .status,
            403);
  EXPECT_EQ(Call("PUT", protect, R"({"protected": true})",
                 {{"cookie", login.cookie}, {"x-csrf-token", login.csrf},
                  {"origin", "https://evil.example"}})
                .status,
            403);
  EXPECT_FALSE(std::filesystem::exists(snap_dir_ + "/.protected"));
  Answer ok = Call("PUT", protect, R"({"protected": true})",
                   {{"cookie", login.cookie}, {"x-csrf-token", login.csrf},
                    {"origin", "https://127.0.0.1:8007"}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(std::filesystem::exists(snap_dir_ + "/.protected"));
  Answer details = Call("GET", "/api/v1/stores/main/snapshots?details=1", "", {{"cookie", login.cookie}});
  ASSERT_EQ(details.status, 200);
  auto list = nlohmann::json::parse(details.body)["snapshots"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["snapshot"], "vm/100/2026-01-01T00:00:00Z");
  EXPECT_EQ(list[0]["protected"], true);
  // A session that is not one is 401, like a bad token; logout ends it.
  EXPECT_EQ(Call("GET", "/api/v1/stores", "", {{"cookie", std::string(kSessionCookie) + "=" + NewRandomHex()}}).status, 401);
  EXPECT_EQ(Call("POST", "/ui/logout", "", {{"cookie", login.cookie}}).status, 403);
  EXPECT_EQ(Call("POST", "/ui/logout", "", {{"cookie", login.cookie}, {"x-csrf-token", login.csrf}}).status, 303);
  EXPECT_EQ(Call("GET", "/api/v1/stores", "", {{"cookie", login.cookie}}).status, 401);
}

TEST_F(DashboardApiTest, AReaderSessionSeesItsStoreOnlyAndMayNotChangeAnything) {
  Login login = LogIn(reader_);
  ASSERT_EQ(login.status, 303);
  std::map<std::string, std::string> h = {{"cookie", login.cookie}, {"x-csrf-token", login.csrf}};
  Answer stores = Call("GET", "/api/v1/stores", "", h);
  EXPECT_EQ(nlohmann::json::parse(stores.body)["stores"], nlohmann::json({"main"}));
  EXPECT_EQ(Call("GET", "/api/v1/stores/other/snapshots?details=1", "", h).status, 403);
  EXPECT_EQ(Call("PUT", "/api/v1/stores/main/protected?snapshot=vm/100/2026-01-01T00:00:00Z",
                 R"({"protected": true})", h)
                .status,
            403);
  EXPECT_EQ(Call("POST", "/api/v1/stores/main/gc", "{}", h).status, 403);
  EXPECT_FALSE(std::filesystem::exists(snap_dir_ + "/.protected"));
  // Revoking the token ends its sessions at once.
  ASSERT_TRUE(tokens_->Revoke("viewer").ok());
  EXPECT_EQ(Call("GET", "/api/v1/stores", "", h).status, 401);
  EXPECT_EQ(Call("GET", "/", "", h).status, 303);
}

}  // namespace
}  // namespace cairn::server
