#include "remote/remote_client.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "remote/remote_repo.h"

namespace cairn::remote {
namespace {

TEST(RemoteUrlTest, ParsesHostPortAndStore) {
  auto url = ParseRemoteUrl("https://backup.example:8443/main");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "backup.example");
  EXPECT_EQ(url->port, 8443);
  EXPECT_EQ(url->store, "main");
  EXPECT_EQ(url->ToString(), "https://backup.example:8443/main");

  url = ParseRemoteUrl("https://10.0.0.1/store1/");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->port, 8007);
  EXPECT_EQ(url->store, "store1");

  url = ParseRemoteUrl("https://[::1]:9000/s");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 9000);
  EXPECT_EQ(url->ToString(), "https://[::1]:9000/s");
}

TEST(RemoteUrlTest, RefusesWhatIsNotOneDatastoreOnHttps) {
  for (const char* bad : {"http://host/main", "https://host", "https://host/", "https:///main",
                          "https://host/a/b", "https://host:0/main", "https://host:70000/main",
                          "https://host:8x/main", "https://[::1/main", "ftp://host/main"}) {
    auto url = ParseRemoteUrl(bad);
    EXPECT_FALSE(url.ok()) << bad;
    if (!url.ok()) {
      EXPECT_EQ(url.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(url.status().message().find(bad), std::string_view::npos)
          << url.status().ToString();
    }
  }
}

TEST(RemoteUrlTest, MirrorDirsAreDistinctPerServerAndStore) {
  RemoteUrl a{"127.0.0.1", 8007, "main"}, b{"127.0.0.1", 8008, "main"}, c{"::1", 8007, "x"};
  EXPECT_EQ(MirrorDir("/c", a), "/c/remote/127.0.0.1_8007/main");
  EXPECT_NE(MirrorDir("/c", a), MirrorDir("/c", b));
  EXPECT_EQ(MirrorDir("/c", c), "/c/remote/__1_8007/x");
}

TEST(TrustedServersTest, LooksUpByHostAndPort) {
  std::string path = ::testing::TempDir() + "/cairn-trusted-servers";
  std::string fp(64, 'a');
  {
    std::ofstream out(path);
    out << "# trusted servers\n\n127.0.0.1:8007 " << fp << "\nother:8007 " << std::string(64, 'b')
        << "\n";
  }
  auto found = LookupTrustedFingerprint(path, "127.0.0.1", 8007);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->size(), 95u);  // display form: 32 pairs and 31 colons
  EXPECT_EQ(found->substr(0, 5), "aa:aa");
  auto none = LookupTrustedFingerprint(path, "127.0.0.1", 8008);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
  auto missing = LookupTrustedFingerprint(path + ".nope", "127.0.0.1", 8007);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, "");
  {
    std::ofstream out(path);
    out << "127.0.0.1:8007\n";
  }
  EXPECT_FALSE(LookupTrustedFingerprint(path, "127.0.0.1", 8007).ok());
  {
    std::ofstream out(path);
    out << "127.0.0.1:8007 nothex\n";
  }
  EXPECT_FALSE(LookupTrustedFingerprint(path, "127.0.0.1", 8007).ok());
  std::remove(path.c_str());
}

TEST(QueryStringTest, EncodesNamesAndValues) {
  EXPECT_EQ(QueryString({}), "");
  std::string q = QueryString({{"ns", "a/b"}, {"snapshot", "vm/1/2026-01-01T00:00:00Z"}});
  EXPECT_EQ(q.find(' '), std::string::npos);
  EXPECT_EQ(q.substr(0, 4), "?ns=");
  EXPECT_NE(q.find("&snapshot="), std::string::npos);
}

}  // namespace
}  // namespace cairn::remote
