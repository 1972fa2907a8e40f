#include "server/read_grants.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit_test_util.h"

namespace cairn::server {
namespace {

crypto::Digest D(uint8_t b) {
  crypto::Digest d;
  d.fill(b);
  return d;
}

TEST(ReadGrantsTest, ATokenReadsOnlyChunksOfIndexesItWasGranted) {
  ReadGrants g(100, std::chrono::seconds(60));
  std::vector<crypto::Digest> index = {D(1), D(2)};
  EXPECT_FALSE(g.MayRead("r", "main", D(1)));
  CAIRN_ASSERT_OK(g.Grant("r", "main", "vm/1/t/disk.img.fidx@x", index));
  EXPECT_TRUE(g.MayRead("r", "main", D(1)));
  EXPECT_TRUE(g.MayRead("r", "main", D(2)));
  EXPECT_FALSE(g.MayRead("r", "main", D(3)));
  EXPECT_FALSE(g.MayRead("other", "main", D(1)));   // per token
  EXPECT_FALSE(g.MayRead("r", "elsewhere", D(1)));  // per datastore
  EXPECT_EQ(g.chunks("r", "main"), 2u);
}

TEST(ReadGrantsTest, AGrantPastTheCapIsRefusedWhole) {
  ReadGrants g(3, std::chrono::seconds(60));
  CAIRN_ASSERT_OK(g.Grant("r", "main", "a", std::vector<crypto::Digest>{D(1), D(2)}));
  // Two of these three are new: 4 > 3.
  auto s = g.Grant("r", "main", "b", std::vector<crypto::Digest>{D(2), D(3), D(4)});
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("limits.max_reader_chunks"), std::string::npos);
  EXPECT_FALSE(g.MayRead("r", "main", D(3)));
  // One new one fits.
  CAIRN_ASSERT_OK(g.Grant("r", "main", "c", std::vector<crypto::Digest>{D(2), D(3)}));
  EXPECT_TRUE(g.MayRead("r", "main", D(3)));
}

TEST(ReadGrantsTest, IdleGrantsAreForgotten) {
  ReadGrants g(10, std::chrono::seconds(0));
  CAIRN_ASSERT_OK(g.Grant("r", "main", "a", std::vector<crypto::Digest>{D(1)}));
  // Idle for 0 s or more: gone at the next call.
  CAIRN_ASSERT_OK(g.Grant("x", "main", "b", std::vector<crypto::Digest>{D(2)}));
  EXPECT_FALSE(g.MayRead("r", "main", D(1)));
}

}  // namespace
}  // namespace cairn::server
