#include "cli/client_config.h"

#include <gtest/gtest.h>

namespace cairn::cli {
namespace {

TEST(ClientConfigTest, NamedRepositoriesAndDefaults) {
  auto c = ParseClientConfig(R"(
[defaults]
repository = "main"
limit_upload = "20M"

[repository.main]
url = "https://backup.example.com:8007/main"
token = "host1:abc"
fingerprint = "3f:a2"
keyfile = "/etc/cairn/key.json"
password_command = "pass show cairn"

[repository.local]
url = "/srv/cairn"
)",
                             "config.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->default_repository, "main");
  EXPECT_EQ(c->limit_upload, "20M");
  const RepositoryEntry* main = c->Find("main");
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->url, "https://backup.example.com:8007/main");
  EXPECT_EQ(main->settings.token, "host1:abc");
  EXPECT_EQ(main->settings.password_command, "pass show cairn");
  ASSERT_NE(c->Find("local"), nullptr);
  EXPECT_EQ(c->Find("other"), nullptr);
}

TEST(ClientConfigTest, MistakesNameTheFileAndTheKey) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"[repository.main]\nurl = \"/x\"\ntokn = \"a\"\n", "\"repository.main.tokn\": unknown key"},
      {"[repository.main]\ntoken = \"a\"\n", "\"repository.main.url\": is required"},
      {"[repository.main]\nurl = 3\n", "\"repository.main.url\": must be a string"},
      {"[defaults]\nrepository = \"nope\"\n", "names no [repository.nope] table"},
      {"colour = \"red\"\n", "\"colour\": unknown key"},
      {"[repository.main\nurl = \"/x\"\n", "line 1"},
  };
  for (const Case& k : cases) {
    auto c = ParseClientConfig(k.text, "/home/u/.config/cairn/config.toml");
    ASSERT_FALSE(c.ok()) << k.text;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << k.text;
    EXPECT_NE(c.status().message().find("/home/u/.config/cairn/config.toml"), std::string_view::npos);
    EXPECT_NE(c.status().message().find(k.expect), std::string_view::npos) << c.status().message();
  }
}

TEST(ClientConfigTest, ATokenInAFileOthersMayReadIsRefused) {
  const char* text = "[repository.main]\nurl = \"/x\"\ntoken = \"a:b\"\n";
  auto shared = ParseClientConfig(text, "c.toml", /*private_file=*/false);
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(shared.status().message().find("chmod 600"), std::string_view::npos);
  EXPECT_TRUE(ParseClientConfig(text, "c.toml", /*private_file=*/true).ok());
  // Without a token a readable file is fine.
  EXPECT_TRUE(ParseClientConfig("[repository.main]\nurl = \"/x\"\n", "c.toml", false).ok());
}

TEST(BackupJobTest, ParsesAJobWithKeepRules) {
  auto j = ParseBackupJob(R"(
repository = "/srv/cairn/main"
id = "host/web1"
sources = ["root.tree=/", "fstab.blob=/etc/fstab"]
excludes = ["/proc", "*.tmp"]
cross_fs = true
keyfile = "/etc/cairn/key.json"
passphrase_file = "/etc/cairn/key.pass"
[keep]
last = 3
daily = 7
)",
                          "web.conf");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->repository, "/srv/cairn/main");
  EXPECT_EQ(j->id, "host/web1");
  EXPECT_EQ(j->sources.size(), 2u);
  EXPECT_EQ(j->excludes.size(), 2u);
  EXPECT_TRUE(j->cross_fs);
  EXPECT_EQ(j->settings.keyfile, "/etc/cairn/key.json");
  EXPECT_EQ(j->keep.at("last"), 3);
  EXPECT_EQ(j->keep.at("daily"), 7);
}

TEST(BackupJobTest, RefusesIncompleteOrMistypedJobs) {
  for (const char* text : {
           "id = \"host/a\"\nsources = [\"r.tree=/\"]\n",                      // no repository
           "repository = \"/s\"\nsources = [\"r.tree=/\"]\n",                  // no id
           "repository = \"/s\"\nid = \"host/a\"\n",                           // no sources
           "repository = \"/s\"\nid = \"host/a\"\nsources = \"r.tree=/\"\n",   // not an array
           "repository = \"/s\"\nid = \"host/a\"\nsources = [\"r.tree=/\"]\n[keep]\nlast = 0\n",
           "repository = \"/s\"\nid = \"host/a\"\nsources = [\"r.tree=/\"]\n[keep]\nforever = 1\n",
       }) {
    auto j = ParseBackupJob(text, "j.conf");
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(j.status().message().find("j.conf"), std::string_view::npos);
  }
}

}  // namespace
}  // namespace cairn::cli
