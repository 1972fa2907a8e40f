#include "sync/group_filter.h"

#include <gtest/gtest.h>

namespace cairn::sync {
namespace {

datastore::GroupRef G(std::string type, std::string id) { return {"", type, id}; }

TEST(GroupFilter, EmptyPassesEverything) {
  auto f = GroupFilter::Parse({});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->empty());
  EXPECT_TRUE(f->Matches(G("vm", "100")));
}

TEST(GroupFilter, IncludesAreOrdAndExcludesWin) {
  auto f = GroupFilter::Parse({"type:vm", "group:ct/7", "exclude:regex:^vm/1"});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_TRUE(f->Matches(G("vm", "200")));
  EXPECT_TRUE(f->Matches(G("ct", "7")));
  EXPECT_FALSE(f->Matches(G("ct", "8")));
  EXPECT_FALSE(f->Matches(G("vm", "100")));  // excluded
  EXPECT_FALSE(f->Matches(G("host", "a")));
}

TEST(GroupFilter, OnlyExcludesKeepTheRest) {
  auto f = GroupFilter::Parse({"exclude:type:host"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Matches(G("vm", "1")));
  EXPECT_FALSE(f->Matches(G("host", "a")));
}

TEST(GroupFilter, RegexSearchesTheWholeName) {
  auto f = GroupFilter::Parse({"regex:10[0-9]$"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->Matches(G("vm", "105")));
  EXPECT_FALSE(f->Matches(G("vm", "1050")));
}

TEST(GroupFilter, BadSpecsAreRefusedWithTheSpelling) {
  for (const char* bad : {"vm", "type:", "type:lxc", "group:vm", "regex:(", "owner:x",
                          "exclude:", "exclude:exclude:type:vm"}) {
    auto f = GroupFilter::Parse({bad});
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(f.status().message().find(bad), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace cairn::sync
