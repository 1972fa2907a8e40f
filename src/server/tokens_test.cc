#include "server/tokens.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "server/server_config.h"
#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

using test_util::TempDir;

void WriteText(const std::string& path, std::string_view text, mode_t mode = 0600) {
  test_util::WriteFileOrFail(path, AsBytes(text));
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::string SecretOf(const std::string& credential) {
  return credential.substr(credential.find(':') + 1);
}

// --- roles ---------------------------------------------------------------------

TEST(TokenRoles, NamesRoundTrip) {
  for (Role r : {Role::kReader, Role::kBackup, Role::kVerify, Role::kAdmin, Role::kMetrics}) {
    auto parsed = ParseRole(RoleName(r));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, r);
  }
  EXPECT_EQ(ParseRole("root").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRole("Admin").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseRole("").status().code(), StatusCode::kInvalidArgument);
}

TEST(TokenRoles, AllowsTable) {
  struct Row {
    Action action;
    bool reader, backup, verify, admin, metrics;
  };
  const Row table[] = {
      {Action::kListStores, true, true, true, true, false},
      {Action::kListSnapshots, true, true, true, true, false},
      {Action::kRead, true, true, true, true, false},
      {Action::kBackup, false, true, false, true, false},
      {Action::kVerify, false, false, true, true, false},
      {Action::kPrune, false, false, false, true, false},
      {Action::kNotes, false, true, false, true, false},
      {Action::kStatus, true, false, true, true, false},
      {Action::kMetrics, false, false, false, true, true},
  };
  for (const Row& row : table) {
    SCOPED_TRACE(static_cast<int>(row.action));
    EXPECT_EQ(Allows(Role::kReader, row.action), row.reader);
    EXPECT_EQ(Allows(Role::kBackup, row.action), row.backup);
    EXPECT_EQ(Allows(Role::kVerify, row.action), row.verify);
    EXPECT_EQ(Allows(Role::kAdmin, row.action), row.admin);
    EXPECT_EQ(Allows(Role::kMetrics, row.action), row.metrics);
  }
}

TEST(TokenRoles, CoversStore) {
  Token all{"a", "*", Role::kReader, 0};
  Token one{"b", "main", Role::kReader, 0};
  EXPECT_TRUE(TokenCoversStore(all, "main"));
  EXPECT_TRUE(TokenCoversStore(all, "other"));
  EXPECT_TRUE(TokenCoversStore(one, "main"));
  EXPECT_FALSE(TokenCoversStore(one, "other"));
}

// --- store -----------------------------------------------------------------------

TEST(TokenStore, CreateAuthenticateRevoke) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->List().empty());

  auto cred = (*store)->Create("host1", "main", Role::kBackup);
  ASSERT_TRUE(cred.ok()) << cred.status().ToString();
  ASSERT_EQ(cred->rfind("host1:", 0), 0u);
  const std::string secret = SecretOf(*cred);
  ASSERT_EQ(secret.size(), 64u);
  EXPECT_EQ(secret.find_first_not_of("0123456789abcdef"), std::string::npos);

  auto token = (*store)->Authenticate(*cred);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->name, "host1");
  EXPECT_EQ(token->store, "main");
  EXPECT_EQ(token->role, Role::kBackup);
  EXPECT_GT(token->created, 1'600'000'000);

  auto list = (*store)->List();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "host1");

  // The secret itself is never stored, only its hash.
  const Bytes file = test_util::ReadFileOrFail(dir.Join("tokens.json"));
  const std::string text(file.begin(), file.end());
  EXPECT_EQ(text.find(secret), std::string::npos);
  EXPECT_NE(text.find("secret_sha256"), std::string::npos);

  ASSERT_TRUE((*store)->Revoke("host1").ok());
  EXPECT_EQ((*store)->Authenticate(*cred).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE((*store)->List().empty());
  EXPECT_EQ((*store)->Revoke("host1").code(), StatusCode::kNotFound);
}

TEST(TokenStore, SecretsDiffer) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto a = (*store)->Create("a", "*", Role::kReader);
  auto b = (*store)->Create("b", "*", Role::kReader);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(SecretOf(*a), SecretOf(*b));
  // A's secret under B's name does not pass.
  EXPECT_EQ((*store)->Authenticate("b:" + SecretOf(*a)).status().code(),
            StatusCode::kPermissionDenied);
}

TEST(TokenStore, EveryFailureLooksTheSame) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto cred = (*store)->Create("host1", "main", Role::kAdmin);
  ASSERT_TRUE(cred.ok());
  std::string wrong = *cred;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  const std::string secret = SecretOf(*cred);

  const std::vector<std::string> bad = {
      wrong,                            // wrong secret
      "nobody:" + secret,               // unknown name
      "host1",                          // no colon
      "host1:",                         // empty secret
      "host1:" + secret.substr(0, 63),  // short secret
      "host1:" + secret + "0",          // long secret
      "host1:" + std::string(64, 'z'),  // not hex
      ":" + secret,                     // empty name
      "",                               // nothing
      "host1:" + secret + ":x",         // trailing junk
  };
  auto first = (*store)->Authenticate(bad[0]);
  ASSERT_FALSE(first.ok());
  for (const std::string& credential : bad) {
    SCOPED_TRACE(credential);
    auto r = (*store)->Authenticate(credential);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
    EXPECT_EQ(r.status().message(), first.status().message());
  }
  // The reason is for the server's log alone, and never holds the secret.
  const std::pair<std::string, std::string> reasons[] = {
      {wrong, "wrong secret for token 'host1'"},
      {"nobody:" + secret, "unknown token 'nobody'"},
      {"host1:", "malformed credential for token 'host1'"},
      {"ev\x01l:" + secret, "unknown token 'ev?l'"},
  };
  for (const auto& [credential, reason] : reasons) {
    std::string why;
    ASSERT_FALSE((*store)->Authenticate(credential, &why).ok());
    EXPECT_NE(why.find(reason), std::string::npos) << why;
    EXPECT_EQ(why.find(secret), std::string::npos) << why;
  }
  // Hex is accepted in either case.
  std::string upper = "host1:";
  for (char ch : secret) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_TRUE((*store)->Authenticate(upper).ok());
}

TEST(TokenStore, PersistsAcrossOpen) {
  TempDir dir;
  std::string cred;
  {
    auto store = TokenStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    auto c = (*store)->Create("keep", "*", Role::kVerify);
    ASSERT_TRUE(c.ok());
    cred = *c;
  }
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto token = (*store)->Authenticate(cred);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->store, "*");
  EXPECT_EQ(token->role, Role::kVerify);
}

TEST(TokenStore, FileIsPrivate) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Create("a", "main", Role::kReader).ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.Join("tokens.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // No temporary file is left behind.
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
}

TEST(TokenStore, RefusesGroupReadableFile) {
  TempDir dir;
  {
    auto store = TokenStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)->Create("a", "main", Role::kReader).ok());
  }
  ASSERT_EQ(::chmod(dir.Join("tokens.json").c_str(), 0640), 0);
  auto store = TokenStore::Open(dir.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(store.status().message().find("tokens.json"), std::string::npos);
}

TEST(TokenStore, CorruptFileIsDataLoss) {
  TempDir dir;
  for (const std::string& text : std::vector<std::string>{
           "{not json", "[]", "{\"version\": 1}", "{\"version\": 2, \"tokens\": []}",
           "{\"version\": 1, \"tokens\": [{\"name\": \"a\"}]}",
           "{\"version\": 1, \"tokens\": [{\"name\": \"a\", \"store\": \"*\", \"role\": \"god\", "
           "\"created\": 1, \"secret_sha256\": \"" +
               std::string(64, '0') + "\"}]}"}) {
    SCOPED_TRACE(text);
    WriteText(dir.Join("tokens.json"), text);
    auto store = TokenStore::Open(dir.path());
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(store.status().message().find(dir.Join("tokens.json")), std::string::npos);
  }
}

TEST(TokenStore, ReloadsWhenAnotherInstanceWrites) {
  TempDir dir;
  auto server = TokenStore::Open(dir.path());
  auto cli = TokenStore::Open(dir.path());
  ASSERT_TRUE(server.ok() && cli.ok());
  auto cred = (*cli)->Create("late", "main", Role::kBackup);
  ASSERT_TRUE(cred.ok());
  auto token = (*server)->Authenticate(*cred);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->name, "late");
  EXPECT_EQ((*server)->List().size(), 1u);

  // The server's own create keeps the other's token (read-modify-write).
  ASSERT_TRUE((*server)->Create("second", "main", Role::kReader).ok());
  EXPECT_EQ((*cli)->List().size(), 2u);

  ASSERT_TRUE((*cli)->Revoke("late").ok());
  EXPECT_EQ((*server)->Authenticate(*cred).status().code(), StatusCode::kPermissionDenied);
}

TEST(TokenStore, FailsClosedWhenFileTurnsBad) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto cred = (*store)->Create("a", "main", Role::kReader);
  ASSERT_TRUE(cred.ok());
  ASSERT_EQ(::chmod(dir.Join("tokens.json").c_str(), 0644), 0);
  EXPECT_FALSE((*store)->Authenticate(*cred).ok());
}

TEST(TokenStore, DuplicateNameIsAlreadyExists) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto first = (*store)->Create("dup", "main", Role::kReader);
  ASSERT_TRUE(first.ok());
  auto again = (*store)->Create("dup", "other", Role::kAdmin);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  // The first one is untouched.
  auto token = (*store)->Authenticate(*first);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->role, Role::kReader);
}

TEST(TokenStore, RejectsBadNamesAndStores) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  for (const std::string& name :
       std::vector<std::string>{"", "a b", "a:b", "a/b", "..", std::string(65, 'a')}) {
    SCOPED_TRACE(name);
    EXPECT_EQ((*store)->Create(name, "main", Role::kReader).status().code(),
              StatusCode::kInvalidArgument);
  }
  EXPECT_EQ((*store)->Create("ok", "a/b", Role::kReader).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ((*store)->Create("ok", "", Role::kReader).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE((*store)->Create(std::string(64, 'a'), "*", Role::kReader).ok());
  EXPECT_TRUE((*store)->Create("A-z_0.9", "s-1.x_Y", Role::kReader).ok());
}

TEST(TokenStore, ConcurrentUse) {
  TempDir dir;
  auto store = TokenStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  auto cred = (*store)->Create("base", "*", Role::kReader);
  ASSERT_TRUE(cred.ok());
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        EXPECT_TRUE((*store)->Authenticate(*cred).ok());
        EXPECT_TRUE((*store)->Create(fmt::format("t{}-{}", t, i), "*", Role::kReader).ok());
      }
    });
  }
  threads.clear();
  EXPECT_EQ((*store)->List().size(), 41u);
}

// --- config ----------------------------------------------------------------------

TEST(ServerConfig, LoadsGoodFile) {
  TempDir dir;
  const std::string path = dir.Join("server.json");
  WriteText(path, R"({
    "listen": ["127.0.0.1:8007", "[::1]:8007"],
    "state_dir": "/var/lib/cairn",
    "stores": {"main": "/srv/cairn/main", "other": "/srv/other"},
    "tls": {"cert": "tls/c.pem", "key": "/etc/cairn/key.pem"},
    "limits": {"max_connections": 10, "max_body_mib": 8,
               "request_timeout_s": 5, "idle_timeout_s": 7},
    "log": "/var/log/cairn.log"
  })");
  auto config = LoadServerConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen, (std::vector<std::string>{"127.0.0.1:8007", "[::1]:8007"}));
  EXPECT_EQ(config->state_dir, "/var/lib/cairn");
  EXPECT_EQ(config->stores.size(), 2u);
  EXPECT_EQ(config->stores.at("main"), "/srv/cairn/main");
  EXPECT_EQ(config->cert_file, "/var/lib/cairn/tls/c.pem");
  EXPECT_EQ(config->key_file, "/etc/cairn/key.pem");
  EXPECT_EQ(config->log, "/var/log/cairn.log");
  const net::ServerOptions o = config->ToServerOptions();
  EXPECT_EQ(o.listen, config->listen);
  EXPECT_EQ(o.cert_file, "/var/lib/cairn/tls/c.pem");
  EXPECT_EQ(o.key_file, "/etc/cairn/key.pem");
  EXPECT_EQ(o.max_connections, 10);
  EXPECT_EQ(o.max_body_bytes, size_t{8} << 20);
  EXPECT_EQ(o.request_timeout, std::chrono::seconds(5));
  EXPECT_EQ(o.idle_timeout, std::chrono::seconds(7));
}

TEST(ServerConfig, DefaultsForMinimalFile) {
  TempDir dir;
  const std::string path = dir.Join("server.json");
  WriteText(path, R"({"state_dir": "/st", "stores": {"main": "/srv/m"}})");
  auto config = LoadServerConfig(path);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->listen, std::vector<std::string>{"127.0.0.1:8007"});
  EXPECT_EQ(config->cert_file, "/st/tls/cert.pem");
  EXPECT_EQ(config->key_file, "/st/tls/key.pem");
  EXPECT_EQ(config->log, "stderr");
  const net::ServerOptions defaults;
  EXPECT_EQ(config->ToServerOptions().max_connections, defaults.max_connections);
  EXPECT_EQ(config->ToServerOptions().max_body_bytes, defaults.max_body_bytes);
}

TEST(ServerConfig, UnknownKeysAreNamed) {
  TempDir dir;
  const std::string path = dir.Join("server.json");
  const std::pair<std::string, std::string> cases[] = {
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "listne": ["127.0.0.1:1"]})", "listne"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"max_conections": 3}})",
       "limits.max_conections"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "tls": {"crt": "x"}})", "tls.crt"},
  };
  for (const auto& [text, key] : cases) {
    SCOPED_TRACE(text);
    WriteText(path, text);
    auto config = LoadServerConfig(path);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find(path), std::string::npos);
    EXPECT_NE(config.status().message().find("\"" + key + "\""), std::string::npos)
        << config.status().message();
  }
}

TEST(ServerConfig, BadTypesAndValues) {
  TempDir dir;
  const std::string path = dir.Join("server.json");
  const std::pair<std::string, std::string> cases[] = {
      {R"({"state_dir": 5, "stores": {"m": "/m"}})", "state_dir"},
      {R"({"state_dir": "/s", "stores": ["/m"]})", "stores"},
      {R"({"state_dir": "/s", "stores": {"m": 1}})", "stores.m"},
      {R"({"state_dir": "/s", "stores": {"a/b": "/m"}})", "stores.a/b"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "listen": [8007]})", "listen"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "listen": ["localhost"]})", "listen"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "listen": ["h:99999"]})", "listen"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"max_connections": "9"}})",
       "limits.max_connections"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"max_connections": 0}})",
       "limits.max_connections"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"max_body_mib": -1}})",
       "limits.max_body_mib"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"max_body_mib": 18446744073709551615}})",
       "limits.max_body_mib"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "limits": {"idle_timeout_s": 1.5}})",
       "limits.idle_timeout_s"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "log": false})", "log"},
      {R"({"state_dir": "/s", "stores": {"m": "/m"}, "tls": "x"})", "tls"},
  };
  for (const auto& [text, key] : cases) {
    SCOPED_TRACE(text);
    WriteText(path, text);
    auto config = LoadServerConfig(path);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(config.status().message().find("\"" + key + "\""), std::string::npos)
        << config.status().message();
  }
  WriteText(path, "{\"state_dir\": ");
  auto config = LoadServerConfig(path);
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(path), std::string::npos);
  EXPECT_EQ(LoadServerConfig(dir.Join("absent.json")).status().code(), StatusCode::kNotFound);
}

TEST(ServerConfig, MissingStateDirOrStores) {
  TempDir dir;
  const std::string path = dir.Join("server.json");
  WriteText(path, R"({"stores": {"m": "/m"}})");
  auto config = LoadServerConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("state_dir"), std::string::npos);

  WriteText(path, R"({"state_dir": "/s"})");
  config = LoadServerConfig(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("stores"), std::string::npos);
}

TEST(ServerConfig, FinishConfigFromFlags) {
  ServerConfig config;
  config.state_dir = "/var/lib/cairn/";
  config.stores["main"] = "/srv/cairn";
  ASSERT_TRUE(FinishConfig(&config).ok());
  EXPECT_EQ(config.listen, std::vector<std::string>{"127.0.0.1:8007"});
  EXPECT_EQ(config.cert_file, "/var/lib/cairn/tls/cert.pem");
  EXPECT_EQ(config.key_file, "/var/lib/cairn/tls/key.pem");
  // Idempotent.
  ASSERT_TRUE(FinishConfig(&config).ok());
  EXPECT_EQ(config.cert_file, "/var/lib/cairn/tls/cert.pem");

  ServerConfig relative;
  relative.state_dir = "state";
  relative.stores["main"] = "/srv/cairn";
  ASSERT_TRUE(FinishConfig(&relative).ok());
  EXPECT_TRUE(std::filesystem::path(relative.state_dir).is_absolute());
  EXPECT_TRUE(std::filesystem::path(relative.cert_file).is_absolute());

  ServerConfig no_store;
  no_store.state_dir = "/s";
  EXPECT_EQ(FinishConfig(&no_store).code(), StatusCode::kInvalidArgument);
  ServerConfig no_state;
  no_state.stores["main"] = "/srv";
  EXPECT_EQ(FinishConfig(&no_state).code(), StatusCode::kInvalidArgument);
}

TEST(ServerConfig, ParsesStoreFlag) {
  auto ok = ParseStoreFlag("main=/srv/cairn");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->first, "main");
  EXPECT_EQ(ok->second, "/srv/cairn");
  auto eq_in_path = ParseStoreFlag("x=/a=b");
  ASSERT_TRUE(eq_in_path.ok());
  EXPECT_EQ(eq_in_path->second, "/a=b");
  for (const char* bad : {"main", "=/srv", "main=", "a b=/srv", "../x=/srv"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(ParseStoreFlag(bad).status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(ServerConfig, ValidNames) {
  EXPECT_TRUE(IsValidName("a"));
  EXPECT_TRUE(IsValidName("Main-1.x_y"));
  EXPECT_TRUE(IsValidName(std::string(64, 'z')));
  EXPECT_FALSE(IsValidName(std::string(65, 'z')));
  EXPECT_FALSE(IsValidName(""));
  EXPECT_FALSE(IsValidName("."));
  EXPECT_FALSE(IsValidName(".."));
  EXPECT_FALSE(IsValidName("a:b"));
  EXPECT_FALSE(IsValidName("a/b"));
  EXPECT_FALSE(IsValidName("*"));
  EXPECT_FALSE(IsValidName("é"));
}

}  // namespace
}  // namespace cairn::server
