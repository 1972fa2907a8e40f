#include "server/audit_log.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

TEST(AuditLogTest, OneJsonLinePerRefusalPrivateAndRotated) {
  test_util::TempDir dir;
  auto logger = NewNullLogger();
  AuditLog log(*logger, dir.Join("audit.log"), /*max_bytes=*/400);
  log.Record({"127.0.0.1:5", "web1", "GET", "/api/v1/stores/main/chunk/ab", 404, "not its group"});
  std::string text(AsStringView(test_util::ReadFileOrFail(dir.Join("audit.log"))));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["token"], "web1");
  EXPECT_EQ(j["status"], 404);
  EXPECT_EQ(j["reason"], "not its group");
  struct stat st;
  ASSERT_EQ(stat(dir.Join("audit.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (int i = 0; i < 5; ++i) log.Record({"p", "t", "GET", "/x", 401, "wrong secret"});
  EXPECT_EQ(stat(dir.Join("audit.log.1").c_str(), &st), 0);  // rotated past 400 bytes
}

TEST(LoginLimiterTest, AnAddressIsLockedOutPastItsFailures) {
  LoginLimiter limiter(3, std::chrono::seconds(60));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(limiter.RetryAfter("10.0.0.1"), 0);
    limiter.Failed("10.0.0.1");
  }
  EXPECT_GT(limiter.RetryAfter("10.0.0.1"), 0);
  EXPECT_LE(limiter.RetryAfter("10.0.0.1"), 61);
  EXPECT_EQ(limiter.RetryAfter("10.0.0.2"), 0);
  LoginLimiter quick(1, std::chrono::seconds(0));
  quick.Failed("a");
  EXPECT_EQ(quick.RetryAfter("a"), 0);  // the window is over
}

}  // namespace
}  // namespace cairn::server
