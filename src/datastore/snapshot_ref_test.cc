#include "datastore/snapshot_ref.h"

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn::datastore {
namespace {

using test_util::CodeOf;

TEST(SnapshotRefTest, Rfc3339RoundTrip) {
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(1796014800), "2026-11-30T05:00:00Z");
  for (int64_t t : {int64_t{0}, int64_t{1}, int64_t{951782400} /* 2000-02-29 */,
                    int64_t{1796014800}, int64_t{4102444799} /* 2099-12-31T23:59:59Z */}) {
    auto back = ParseRfc3339(FormatRfc3339(t));
    CAIRN_ASSERT_OK(back);
    EXPECT_EQ(*back, t) << FormatRfc3339(t);
  }
  auto leap = ParseRfc3339("2024-02-29T12:34:56Z");
  CAIRN_ASSERT_OK(leap);
  EXPECT_EQ(FormatRfc3339(*leap), "2024-02-29T12:34:56Z");
}

TEST(SnapshotRefTest, Rfc3339RejectsOtherForms) {
  for (std::string_view bad :
       {"", "2026-02-31T00:00:00Z", "2025-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z", "2026-11-30T05:00:00+00:00",
        "2026-11-30T05:00:00+01:00", "2026-11-30T05:00:00z", "2026-11-30t05:00:00Z",
        "2026-11-30 05:00:00Z", "2026-11-30T05:00:00.000Z", "2026-11-30T05:00:00",
        "2026-11-30", "1969-12-31T23:59:59Z", "+026-11-30T05:00:00Z", "2026-1-30T05:00:00Z",
        "2026-11-30T05:00:0aZ", "latest", "2026-11-30T05:00:00Z "}) {
    auto r = ParseRfc3339(bad);
    EXPECT_EQ(CodeOf(r), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SnapshotRefTest, ParseGroup) {
  auto g = ParseGroup("", "vm/100");
  CAIRN_ASSERT_OK(g);
  EXPECT_EQ(g->type, "vm");
  EXPECT_EQ(g->id, "100");
  EXPECT_EQ(g->ns, "");
  EXPECT_EQ(g->ToString(), "vm/100");
  CAIRN_EXPECT_OK(ParseGroup("", "ct/web-1.example_a"));
  CAIRN_EXPECT_OK(ParseGroup("", "host/" + std::string(128, 'h')));

  for (std::string bad : {std::string(""), std::string("vm"), std::string("vm/"),
                          std::string("/100"), std::string("vm/100/x"), std::string("VM/100"),
                          std::string("lxc/100"), std::string("vm/.hidden"),
                          std::string("vm/-x"), std::string("vm/a b"), std::string("vm/..")
                          , std::string("host/" + std::string(129, 'h'))}) {
    EXPECT_EQ(CodeOf(ParseGroup("", bad)), StatusCode::kInvalidArgument) << bad;
  }
  auto bad_type = ParseGroup("", "lxc/100");
  EXPECT_NE(bad_type.status().message().find("vm, ct, host"), std::string_view::npos);
}

TEST(SnapshotRefTest, NamespacesAndRelDir) {
  auto g = ParseGroup("site-a/rack1", "vm/100");
  CAIRN_ASSERT_OK(g);
  EXPECT_EQ(g->RelDir(), "ns/site-a/ns/rack1/vm/100");
  EXPECT_EQ((GroupRef{"", "ct", "7"}.RelDir()), "ct/7");
  EXPECT_EQ((GroupRef{"a", "ct", "7"}.RelDir()), "ns/a/ct/7");

  SnapshotRef s{*g, 1796014800};
  EXPECT_EQ(s.TimeString(), "2026-11-30T05:00:00Z");
  EXPECT_EQ(s.ToString(), "vm/100/2026-11-30T05:00:00Z");
  EXPECT_EQ(s.RelDir(), "ns/site-a/ns/rack1/vm/100/2026-11-30T05:00:00Z");

  CAIRN_EXPECT_OK(ValidateNamespace(""));
  CAIRN_EXPECT_OK(ValidateNamespace("a/b/c/d/e/f/g"));
  for (std::string_view bad : {"a/b/c/d/e/f/g/h", "/a", "a/", "a//b", ".a", "a/../b", "a b"}) {
    EXPECT_EQ(CodeOf(ValidateNamespace(bad)), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(CodeOf(ParseGroup(bad, "vm/1")), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SnapshotRefTest, ParseSnapshotSpec) {
  auto latest = ParseSnapshotSpec("", "vm/100/latest");
  CAIRN_ASSERT_OK(latest);
  EXPECT_TRUE(latest->latest);
  EXPECT_EQ(latest->group, (GroupRef{"", "vm", "100"}));

  auto timed = ParseSnapshotSpec("ns1", "ct/7/2026-11-30T05:00:00Z");
  CAIRN_ASSERT_OK(timed);
  EXPECT_FALSE(timed->latest);
  EXPECT_EQ(timed->time, 1796014800);
  EXPECT_EQ(timed->group, (GroupRef{"ns1", "ct", "7"}));

  for (std::string_view bad :
       {"", "vm/100", "vm/100/", "vm/100/Latest", "vm/100/latest/x", "xx/100/latest",
        "vm/100/2026-02-31T00:00:00Z", "vm//latest", "/vm/100/latest",
        "vm/100/2026-11-30T05:00:00+00:00"}) {
    EXPECT_EQ(CodeOf(ParseSnapshotSpec("", bad)), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace cairn::datastore
