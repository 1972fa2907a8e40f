// Fuzz target for what `cairn serve` does with a client's bytes: Beast's
// request parser with the server's limits (src/net/http_server.cc), cairn's
// target decoding (net::DecodeRequestTarget), then server::Api::Handle with
// an in-memory ResponseWriter, on a small datastore in a temporary directory
// (one snapshot with a few files, one chunk) and a token store with a
// reader, a backup and an admin token.
//
// The input is what a client sends on one connection: up to 4 pipelined
// requests. A token's secret cannot be guessed, so in an Authorization
// header "$R", "$B" and "$A" are replaced by the reader's, backup's and
// admin's NAME:SECRET (the dictionary has them); likewise, in a Cookie
// header "$S" is replaced by the value of an admin's web dashboard session
// and in an X-CSRF-Token header "$C" by its CSRF token (the session is made
// again when an input logged it out).
//
// Invariants, beyond no crash and clean sanitizers:
//   - the parser never hands on a body over its limit;
//   - a target that decodes has a path starting with '/' and no NUL;
//   - the API answers every request (once), never with a 5xx, and with a
//     JSON error body for every status >= 400 under /api/;
//   - under /api/, only GET /api/v1/version answers 200 without a real
//     token or session; the dashboard's pages (/, /ui/…) answer without
//     one only the login form and the embedded assets, never a secret;
//   - a 200 from …/file returns one of the planted snapshot files, nothing
//     else (no path leaves the snapshot directory).
#include <cstdio>
#include <stdlib.h>
#include <unistd.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/logging.h"
#include "datastore/datastore.h"
#include "net/byte_body.h"
#include "net/http_server.h"
#include "server/api.h"
#include "server/tokens.h"
#include "server/web/dashboard.h"

#define FUZZ_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      __builtin_fprintf(stderr, "http_request_fuzz: invariant failed: %s\n", #cond); \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using cairn::Bytes;
using cairn::ByteSpan;

// The server's header limit; a smaller body limit than its 64 MiB keeps
// runs fast (the limit's code path is the same).
constexpr uint32_t kHeaderLimit = 16 << 10;
constexpr uint64_t kBodyLimit = 64 << 10;
constexpr int kMaxRequests = 4;

void Check(const cairn::Status& s, const char* what) {
  if (!s.ok()) {
    __builtin_fprintf(stderr, "http_request_fuzz: setup: %s: %s\n", what, s.ToString().c_str());
    std::abort();
  }
}

// Records what the handler answers; runs a stream's producer to its end
// (as the server would, piece by piece).
class MemoryWriter final : public cairn::net::ResponseWriter {
 public:
  void Send(int status, std::string_view content_type, Bytes body, const Headers& h) override {
    ++responses;
    if (responded_) return;
    responded_ = true;
    headers = h;
    this->status = status;
    this->content_type = std::string(content_type);
    this->body = std::move(body);
  }
  void Stream(int status, std::string_view content_type, Producer next) override {
    ++responses;
    if (responded_) return;
    responded_ = true;
    streaming = true;
    this->status = status;
    this->content_type = std::string(content_type);
    bool done = false;
    for (int i = 0; i < 100000 && !done; ++i) {
      StreamPieces pieces;
      cairn::Status s = next(&pieces, &done);
      if (!s.ok()) return;  // the server cuts the connection
      for (const cairn::ReadBuffer& p : pieces.pieces) body.insert(body.end(), p.begin(), p.end());
    }
    FUZZ_CHECK(done);
    ended = true;
  }
  bool responded() const override { return responded_; }

  int responses = 0;
  int status = 0;
  Headers headers;
  std::string content_type;
  Bytes body;
  bool streaming = false;
  bool ended = false;

 private:
  bool responded_ = false;
};

struct World {
  std::string dir;
  std::unique_ptr<cairn::Env> env;
  std::unique_ptr<cairn::Logger> logger;
  std::unique_ptr<cairn::server::TokenStore> tokens;
  std::unique_ptr<cairn::server::Api> api;
  std::string reader, backup, admin;  // NAME:SECRET
  std::set<std::string> files;        // contents of the planted snapshot files

  World() {
    const char* tmp = getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/cairn-http-fuzz-XXXXXX";
    FUZZ_CHECK(mkdtemp(templ.data()) != nullptr);
    dir = templ;
    env = cairn::NewPosixEnv();
    logger = cairn::NewNullLogger();
    std::map<std::string, std::unique_ptr<cairn::datastore::Datastore>> stores;
    for (const char* name : {"main", "other"}) {
      std::string path = dir + "/" + name;
      Check(cairn::datastore::Datastore::Init(*env, path), "init datastore");
      auto ds = cairn::datastore::Datastore::Open(*env, path);
      Check(ds.status(), "open datastore");
      stores[name] = std::move(*ds);
    }
    // One finished snapshot (the manifest's presence is what counts) with a
    // file of each kind, and one chunk.
    std::string snap = dir + "/main/vm/100/2026-01-01T00:00:00Z";
    std::filesystem::create_directories(snap);
    for (const char* f : {"index.json.blob", "disk0.img.fidx", "root.tree.meta.didx",
                          "root.tree.data.didx", "notes.blob", "verify.json.blob"}) {
      std::string content = std::string("planted:") + f;
      Check(cairn::WriteFileAtomic(*env, snap + "/" + f, cairn::AsBytes(content)), "plant file");
      files.insert(content);
    }
    cairn::crypto::Digest id;
    id.fill(0x11);
    std::string chunk = "stored chunk bytes";
    Check(stores["main"]->chunks().Insert(id, cairn::AsBytes(chunk)).status(), "insert chunk");
    // Something outside every datastore that must never be served.
    Check(cairn::WriteFileAtomic(*env, dir + "/secret.blob", cairn::AsBytes(std::string("secret"))),
          "plant secret");

    std::string state = dir + "/state";
    std::filesystem::create_directories(state);
    auto t = cairn::server::TokenStore::Open(state);
    Check(t.status(), "open tokens");
    tokens = std::move(*t);
    auto make = [&](const char* name, const char* store, cairn::server::Role role) {
      auto cred = tokens->Create(name, store, role);
      Check(cred.status(), "create token");
      return *cred;
    };
    reader = make("r", "main", cairn::server::Role::kReader);
    backup = make("b", "main", cairn::server::Role::kBackup);
    admin = make("a", "*", cairn::server::Role::kAdmin);
    cairn::server::ApiOptions options;
    options.state_dir = state;
    // Every input's logins count: a lockout would hide the handlers.
    options.max_failed_logins_per_minute = 0;
    api = std::make_unique<cairn::server::Api>(*env, *logger, *tokens, std::move(stores),
                                              options);
    EnsureSession();
  }

  // An admin's dashboard session, logged in through the login form as a
  // browser would; made again when the last input ended it.
  std::string session, csrf;  // the cookie's value, its CSRF token
  void EnsureSession() {
    if (!session.empty() &&
        Call("GET", "/ui/session", "", {{"cookie", std::string(cairn::server::kSessionCookie) + "=" + session}})
                .status == 200) {
      return;
    }
    MemoryWriter form = Call("GET", "/ui/login", "", {});
    std::string login = CookieOf(form, cairn::server::kLoginCookie);
    MemoryWriter in = Call("POST", "/ui/login", "token=" + admin + "&csrf=" + login,
                           {{"cookie", std::string(cairn::server::kLoginCookie) + "=" + login}});
    FUZZ_CHECK(in.status == 303);
    session = CookieOf(in, cairn::server::kSessionCookie);
    MemoryWriter info = Call("GET", "/ui/session", "",
                             {{"cookie", std::string(cairn::server::kSessionCookie) + "=" + session}});
    FUZZ_CHECK(info.status == 200);
    csrf = nlohmann::json::parse(info.body.begin(), info.body.end())["csrf"];
  }

 private:
  MemoryWriter Call(const std::string& method, const std::string& path, const std::string& body,
                    std::map<std::string, std::string> headers) {
    cairn::net::HttpRequest r;
    r.method = method;
    r.target = r.path = path;
    r.headers = std::move(headers);
    r.body = Bytes(body.begin(), body.end());
    r.peer = "127.0.0.1:1";
    r.peer_address = "127.0.0.1";
    MemoryWriter w;
    api->Handle(r, w);
    return w;
  }
  static std::string CookieOf(const MemoryWriter& w, std::string_view name) {
    for (const auto& [header, value] : w.headers) {
      if (header == "Set-Cookie" && value.starts_with(std::string(name) + "=")) {
        return value.substr(name.size() + 1, value.find(';') - name.size() - 1);
      }
    }
    FUZZ_CHECK(false);
    return "";
  }
};

World& TheWorld() {
  static World* world = new World();
  static bool cleanup = [] {
    atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(TheWorld().dir, ignored);
    });
    return true;
  }();
  (void)cleanup;
  return *world;
}

void ReplaceAll(std::string* s, std::string_view from, const std::string& to) {
  for (size_t pos = 0; (pos = s->find(from, pos)) != std::string::npos; pos += to.size()) {
    s->replace(pos, from.size(), to);
  }
}

// What the server does with one parsed request (Session::OnRead, then the
// worker), with the invariants above.
void Serve(World& w, http::request<cairn::net::ByteBody>& message) {
  cairn::net::HttpRequest req;
  req.method = std::string(message.method_string());
  req.target = std::string(message.target());
  if (!cairn::net::DecodeRequestTarget(req.target, &req.path, &req.query)) return;  // 400
  FUZZ_CHECK(!req.path.empty() && req.path[0] == '/');
  FUZZ_CHECK(req.path.find('\0') == std::string::npos);
  for (const auto& [name, value] : req.query) {
    FUZZ_CHECK(name.find('\0') == std::string::npos && value.find('\0') == std::string::npos);
  }
  bool real_token = false;
  for (const auto& field : message) {
    std::string name(field.name_string());
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    std::string value(field.value());
    if (name == "authorization") {
      size_t before = value.size();
      ReplaceAll(&value, "$R", w.reader);
      ReplaceAll(&value, "$B", w.backup);
      ReplaceAll(&value, "$A", w.admin);
      real_token = real_token || value.size() != before;
    } else if (name == "cookie") {
      size_t before = value.size();
      ReplaceAll(&value, "$S", w.session);
      real_token = real_token || value.size() != before;
    } else if (name == "x-csrf-token") {
      ReplaceAll(&value, "$C", w.csrf);
    }
    auto [it, inserted] = req.headers.emplace(name, value);
    if (!inserted) it->second += ", " + value;
  }
  req.peer = "127.0.0.1:1";
  req.peer_address = "127.0.0.1";

  // The header step first, as the server runs it: a refusal is a 4xx
  // with a JSON error, and nothing but the version route passes without a
  // real token.
  cairn::net::Admission admission = w.api->Admit(req);
  if (admission.status != 0) {
    FUZZ_CHECK(admission.status >= 400 && admission.status < 500);
    auto j = nlohmann::json::parse(admission.body, nullptr, false);
    FUZZ_CHECK(!j.is_discarded() && j.contains("error"));
    return;
  }
  const bool dashboard = cairn::server::Dashboard::Serves(req.path);
  if (!real_token && !dashboard) FUZZ_CHECK(req.path == "/api/v1/version");
  if (message.body().size() > admission.max_body) return;  // 413
  req.tenant = admission.tenant;
  req.body = std::move(message.body());

  MemoryWriter res;
  w.api->Handle(req, res);  // an exception is a finding (the server would answer 500)
  FUZZ_CHECK(res.responded());
  FUZZ_CHECK(res.responses == 1);
  FUZZ_CHECK(res.status >= 200 && res.status < 500);
  if (res.streaming) FUZZ_CHECK(res.ended);
  if (res.status >= 400 && !dashboard) {
    auto j = nlohmann::json::parse(res.body.begin(), res.body.end(), nullptr, false);
    FUZZ_CHECK(!j.is_discarded() && j.contains("error"));
  }
  if (res.status == 200 && !real_token) {
    FUZZ_CHECK(req.path == "/api/v1/version" || req.path == "/ui/login" ||
               (dashboard && req.path != "/" && req.path != "/ui/session"));
  }
  // No answer shows a token's secret (the login form never echoes one),
  // unless the client wrote it in the request's method, target, a header
  // other than Authorization or the body: an error may quote the client's
  // own path, or its method ("PATH takes PUT, not METHOD": libFuzzer once
  // put the reader's secret in the method; the input is kept as a
  // regression).
  std::string sent(message.method_string().data(), message.method_string().size());
  sent.append(message.target().data(), message.target().size());
  for (const auto& field : message) {
    if (!beast::iequals(field.name_string(), "authorization")) sent.append(field.value().data(), field.value().size());
  }
  sent += cairn::AsStringView(req.body);
  const std::string_view text = cairn::AsStringView(res.body);
  for (const std::string* t : {&w.reader, &w.backup, &w.admin}) {
    const std::string_view secret = std::string_view(*t).substr(t->find(':') + 1);
    if (sent.find(secret) != std::string::npos) continue;
    FUZZ_CHECK(text.find(secret) == std::string_view::npos);
  }
  if (res.status == 200 && req.path.ends_with("/file")) {
    FUZZ_CHECK(w.files.count(std::string(cairn::AsStringView(res.body))) == 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = TheWorld();
  w.EnsureSession();
  boost::asio::const_buffer input(data, size);
  for (int n = 0; n < kMaxRequests && input.size() > 0; ++n) {
    http::request_parser<cairn::net::ByteBody> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    beast::error_code ec;
    while (!parser.is_done()) {
      size_t used = parser.put(input, ec);
      input += used;
      if (ec == http::error::need_more) {
        // All that is left was offered: the connection ends here.
        parser.put_eof(ec);
        break;
      }
      if (ec || used == 0) break;
    }
    if (ec || !parser.is_done()) return 0;  // 400/413/431 or the client went away
    auto message = parser.release();
    FUZZ_CHECK(message.body().size() <= kBodyLimit);
    Serve(w, message);
    if (!message.keep_alive()) return 0;
  }
  return 0;
}
