#include "s3store/s3_location.h"

#include <gtest/gtest.h>

#include <map>

#include "s3store/s3_repo.h"

namespace cairn::s3store {
namespace {

s3::GetEnvFn FakeEnv(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(S3LocationTest, ParsesBucketPrefixAndOptions) {
  auto loc = ParseS3Url("s3://backups/site1/vms?endpoint=http://127.0.0.1:7480&region=eu-1",
                        FakeEnv({}));
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->config.bucket, "backups");
  EXPECT_EQ(loc->prefix, "site1/vms");
  EXPECT_EQ(loc->config.endpoint, "http://127.0.0.1:7480");
  EXPECT_EQ(loc->config.region, "eu-1");
  EXPECT_EQ(loc->config.addressing, s3::Addressing::kPathStyle);
  EXPECT_EQ(loc->Key(".chunks/abc/x"), "site1/vms/.chunks/abc/x");
  EXPECT_EQ(loc->Key(""), "site1/vms/");
  EXPECT_EQ(loc->Display(), "s3://backups/site1/vms");
}

TEST(S3LocationTest, NoPrefixTrailingSlashEncodedEndpointAndVirtualStyle) {
  auto loc = ParseS3Url("s3://backups/?endpoint=https%3A%2F%2Fs3.example.com%2F&style=virtual",
                        FakeEnv({}));
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->prefix, "");
  EXPECT_EQ(loc->Key("index.json.blob"), "index.json.blob");
  EXPECT_EQ(loc->Key(""), "");
  EXPECT_EQ(loc->config.endpoint, "https://s3.example.com");
  EXPECT_EQ(loc->config.addressing, s3::Addressing::kVirtualHost);
  EXPECT_EQ(loc->Display(), "s3://backups");
}

TEST(S3LocationTest, DefaultsComeFromTheEnvironment) {
  auto loc = ParseS3Url("s3://backups", FakeEnv({{"AWS_REGION", "eu-west-3"}}));
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->config.region, "eu-west-3");
  EXPECT_EQ(loc->config.endpoint, "https://s3.eu-west-3.amazonaws.com");
  loc = ParseS3Url("s3://backups", FakeEnv({{"AWS_ENDPOINT_URL", "http://10.0.0.1:9000"}}));
  ASSERT_TRUE(loc.ok());
  EXPECT_EQ(loc->config.endpoint, "http://10.0.0.1:9000");
  EXPECT_EQ(loc->config.region, "us-east-1");
}

TEST(S3LocationTest, RefusesBadUrlsSayingWhy) {
  for (const char* bad :
       {"s3://", "s3://ab", "s3://Upper", "s3://a_b_c", "s3://-abc", "s3://b..c",
        "s3://bucket/a//b", "s3://bucket/../x", "s3://bucket/a/./b", "s3://bucket/.hidden",
        "s3://bucket?endpoint=ftp://x", "s3://bucket?color=red", "s3://bucket?style=other",
        "s3://bucket/%zz", "https://bucket"}) {
    auto loc = ParseS3Url(bad, FakeEnv({}));
    EXPECT_FALSE(loc.ok()) << bad;
    if (!loc.ok()) {
      EXPECT_EQ(loc.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(loc.status().message().find(bad), std::string::npos)
          << bad << ": " << loc.status().ToString();
    }
  }
}

TEST(S3LocationTest, CredentialsAreRequired) {
  auto loc = ResolveS3Url("s3://backups?endpoint=http://h:1", FakeEnv({}), nullptr);
  ASSERT_FALSE(loc.ok());
  EXPECT_NE(loc.status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos)
      << loc.status().ToString();
  loc = ResolveS3Url("s3://backups?endpoint=http://h:1",
                     FakeEnv({{"AWS_ACCESS_KEY_ID", "a"}, {"AWS_SECRET_ACCESS_KEY", "s"}}), nullptr);
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->config.credentials.access_key, "a");
}

TEST(S3LocationTest, CacheDirSeparatesEndpointsBucketsAndPrefixes) {
  auto a = ParseS3Url("s3://bkt/p/q?endpoint=http://127.0.0.1:7480", FakeEnv({}));
  auto b = ParseS3Url("s3://bkt?endpoint=http://127.0.0.1:7481", FakeEnv({}));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(CacheDirFor("/c", *a), "/c/s3/127.0.0.1_7480/bkt/p/q");
  EXPECT_EQ(CacheDirFor("/c", *b), "/c/s3/127.0.0.1_7481/bkt");
}

TEST(S3EnvTest, OnlyMetadataFilesAreWrittenThrough) {
  auto loc = ParseS3Url("s3://bkt/pre?endpoint=http://127.0.0.1:1", FakeEnv({}));
  ASSERT_TRUE(loc.ok());
  S3Env env(NewPosixEnv(), nullptr, *loc, "/cache/x");
  EXPECT_EQ(env.SyncedKey("/cache/x/vm/100/2026-01-01T00:00:00Z/index.json.blob"),
            "pre/vm/100/2026-01-01T00:00:00Z/index.json.blob");
  EXPECT_EQ(env.SyncedKey("/cache/x/ns/a/host/h/owner"), "pre/ns/a/host/h/owner");
  EXPECT_EQ(env.SyncedKey("/cache/x/vm/100/T/.protected"), "pre/vm/100/T/.protected");
  for (const char* local :
       {"/cache/x/.cairn-datastore", "/cache/x/.gc/lock", "/cache/x/.writers/1-2-3",
        "/cache/x/.ledger/ledger", "/cache/x/vm/100/.lock", "/cache/x/vm/100/T/index.json.blob.tmp-7",
        "/cache/x/vm/100/T/a.img.fidx.tmp", "/cache/xy/vm/1/T/index.json.blob", "/cache/x",
        "/elsewhere/vm/100/T/index.json.blob"}) {
    EXPECT_EQ(env.SyncedKey(local), std::nullopt) << local;
  }
}

}  // namespace
}  // namespace cairn::s3store
