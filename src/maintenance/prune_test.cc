#include "maintenance/prune.h"

#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "datastore/snapshot_writer.h"
#include "tests/unit_test_util.h"

namespace cairn::maintenance {
namespace {

using datastore::Datastore;
using datastore::GroupRef;
using datastore::SnapshotRef;
using test_util::CodeOf;

int64_t T(const char* rfc3339) {
  auto t = datastore::ParseRfc3339(rfc3339);
  EXPECT_TRUE(t.ok()) << rfc3339;
  return t.ok() ? *t : 0;
}

// --- the rule table ------------------------------------------------------------

struct Row {
  const char* time;
  bool is_protected;
  const char* expect;  // KeepReasonName of the expected decision
};

struct Case {
  const char* name;
  KeepOptions keep;
  std::vector<Row> rows;  // newest first, as ComputePrune returns them
};

KeepOptions Keep(uint32_t last, uint32_t hourly, uint32_t daily, uint32_t weekly,
                 uint32_t monthly, uint32_t yearly) {
  return KeepOptions{last, hourly, daily, weekly, monthly, yearly, /*utc=*/true};
}

constexpr bool P = true;   // protected
constexpr bool _ = false;  // not protected

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {"last 3 of 5",
       Keep(3, 0, 0, 0, 0, 0),
       {{"2026-01-05T00:00:00Z", _, "last"},
        {"2026-01-04T00:00:00Z", _, "last"},
        {"2026-01-03T00:00:00Z", _, "last"},
        {"2026-01-02T00:00:00Z", _, "remove"},
        {"2026-01-01T00:00:00Z", _, "remove"}}},
      {"last larger than the list keeps all",
       Keep(10, 0, 0, 0, 0, 0),
       {{"2026-01-03T00:00:00Z", _, "last"},
        {"2026-01-02T00:00:00Z", _, "last"},
        {"2026-01-01T00:00:00Z", _, "last"}}},
      {"hourly 2: newest of each hour, older hours dropped",
       Keep(0, 2, 0, 0, 0, 0),
       {{"2026-03-01T12:00:00Z", _, "hourly"},
        {"2026-03-01T11:50:00Z", _, "hourly"},
        {"2026-03-01T11:10:00Z", _, "remove"},
        {"2026-03-01T10:30:00Z", _, "remove"},
        {"2026-03-01T10:05:00Z", _, "remove"}}},
      {"daily 3: days without backups do not count",
       Keep(0, 0, 3, 0, 0, 0),
       {{"2026-01-08T01:00:00Z", _, "daily"},
        {"2026-01-07T23:59:59Z", _, "daily"},
        {"2026-01-07T00:00:00Z", _, "remove"},
        {"2026-01-03T10:00:00Z", _, "daily"},
        {"2026-01-01T20:00:00Z", _, "remove"},
        {"2026-01-01T10:00:00Z", _, "remove"}}},
      {"daily: midnight starts a new day",
       Keep(0, 0, 2, 0, 0, 0),
       {{"2026-01-02T00:00:00Z", _, "daily"},
        {"2026-01-01T23:59:59Z", _, "daily"},
        {"2026-01-01T00:00:00Z", _, "remove"}}},
      // 2026-12-28 is the Monday of ISO week 2026/53; 2027-01-03 (a Sunday)
      // still belongs to it; 2027-01-04 (Monday) starts 2027/01.
      {"weekly 2 across the year boundary (ISO weeks)",
       Keep(0, 0, 0, 2, 0, 0),
       {{"2027-01-04T00:00:00Z", _, "weekly"},
        {"2027-01-03T23:59:59Z", _, "weekly"},
        {"2027-01-01T12:00:00Z", _, "remove"},
        {"2026-12-31T12:00:00Z", _, "remove"},
        {"2026-12-28T00:00:00Z", _, "remove"},
        {"2026-12-27T23:00:00Z", _, "remove"}}},
      {"weekly 3: the Sunday before is another week",
       Keep(0, 0, 0, 3, 0, 0),
       {{"2027-01-04T00:00:00Z", _, "weekly"},
        {"2027-01-03T23:59:59Z", _, "weekly"},
        {"2026-12-31T12:00:00Z", _, "remove"},
        {"2026-12-28T00:00:00Z", _, "remove"},
        {"2026-12-27T23:00:00Z", _, "weekly"},
        {"2026-12-21T00:00:00Z", _, "remove"}}},
      {"monthly 2",
       Keep(0, 0, 0, 0, 2, 0),
       {{"2026-03-31T23:00:00Z", _, "monthly"},
        {"2026-03-01T00:00:00Z", _, "remove"},
        {"2026-01-15T00:00:00Z", _, "monthly"},
        {"2025-12-31T23:59:59Z", _, "remove"}}},
      {"yearly 2",
       Keep(0, 0, 0, 0, 0, 2),
       {{"2027-01-01T00:00:00Z", _, "yearly"},
        {"2026-12-31T23:59:59Z", _, "yearly"},
        {"2026-06-01T00:00:00Z", _, "remove"},
        {"2024-01-01T00:00:00Z", _, "remove"}}},
      {"last then daily: daily skips the days last already keeps",
       Keep(2, 0, 2, 0, 0, 0),
       {{"2026-01-03T18:00:00Z", _, "last"},
        {"2026-01-03T12:00:00Z", _, "last"},
        {"2026-01-03T06:00:00Z", _, "remove"},
        {"2026-01-02T18:00:00Z", _, "daily"},
        {"2026-01-02T06:00:00Z", _, "remove"},
        {"2026-01-01T18:00:00Z", _, "daily"},
        {"2025-12-31T18:00:00Z", _, "remove"}}},
      {"daily, weekly, monthly, yearly together",
       Keep(0, 0, 2, 2, 2, 2),
       {{"2026-03-10T00:00:00Z", _, "daily"},     // Tue, week 11
        {"2026-03-09T00:00:00Z", _, "daily"},     // Mon, week 11
        {"2026-03-08T00:00:00Z", _, "weekly"},    // Sun, week 10
        {"2026-03-02T00:00:00Z", _, "remove"},    // week 10 again
        {"2026-03-01T00:00:00Z", _, "weekly"},    // Sun, week 9
        {"2026-02-20T00:00:00Z", _, "monthly"},   // February
        {"2026-02-01T00:00:00Z", _, "remove"},
        {"2026-01-20T00:00:00Z", _, "monthly"},   // January
        {"2025-12-24T00:00:00Z", _, "yearly"},
        {"2025-06-01T00:00:00Z", _, "remove"},
        {"2024-12-31T00:00:00Z", _, "yearly"},
        {"2023-12-31T00:00:00Z", _, "remove"}}},
      {"every rule with 1",
       Keep(1, 1, 1, 1, 1, 1),
       {{"2026-05-05T10:30:00Z", _, "last"},
        {"2026-05-05T10:00:00Z", _, "remove"},  // hour 10 is kept by last
        {"2026-05-05T09:00:00Z", _, "hourly"},
        {"2026-05-04T09:00:00Z", _, "daily"},
        {"2026-05-03T09:00:00Z", _, "weekly"},  // Sunday: week 18
        {"2026-04-03T09:00:00Z", _, "monthly"},
        {"2025-04-03T09:00:00Z", _, "yearly"},
        {"2024-04-03T09:00:00Z", _, "remove"}}},
      {"protected snapshots never use up a keep-last slot",
       Keep(2, 0, 0, 0, 0, 0),
       {{"2026-01-05T00:00:00Z", P, "protected"},
        {"2026-01-04T00:00:00Z", _, "last"},
        {"2026-01-03T00:00:00Z", P, "protected"},
        {"2026-01-02T00:00:00Z", _, "last"},
        {"2026-01-01T00:00:00Z", _, "remove"}}},
      {"a protected snapshot does not cover its day",
       Keep(0, 0, 1, 0, 0, 0),
       {{"2026-01-02T18:00:00Z", P, "protected"},
        {"2026-01-02T06:00:00Z", _, "daily"},
        {"2026-01-01T06:00:00Z", _, "remove"}}},
      {"protected old snapshots stay whatever the rules say",
       Keep(1, 0, 0, 0, 0, 0),
       {{"2026-01-03T00:00:00Z", _, "last"},
        {"2026-01-02T00:00:00Z", _, "remove"},
        {"2020-01-01T00:00:00Z", P, "protected"}}},
      {"no rule keeps everything",
       Keep(0, 0, 0, 0, 0, 0),
       {{"2026-01-02T00:00:00Z", _, "all"}, {"2026-01-01T00:00:00Z", P, "protected"}}},
  };
  return cases;
}

TEST(PruneRulesTest, Table) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<PruneCandidate> in;
    for (const Row& r : c.rows) in.push_back({T(r.time), r.is_protected});
    // The input order must not matter.
    std::shuffle(in.begin(), in.end(), std::mt19937(42));
    auto out = ComputePrune(in, c.keep);
    ASSERT_EQ(out.size(), c.rows.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(datastore::FormatRfc3339(out[i].time), c.rows[i].time) << "row " << i;
      EXPECT_EQ(out[i].is_protected, c.rows[i].is_protected) << c.rows[i].time;
      EXPECT_EQ(KeepReasonName(out[i].reason), c.rows[i].expect) << c.rows[i].time;
      EXPECT_EQ(out[i].keep(), std::string(c.rows[i].expect) != "remove") << c.rows[i].time;
    }
  }
}

TEST(PruneRulesTest, EmptyList) {
  EXPECT_TRUE(ComputePrune({}, Keep(3, 0, 0, 0, 0, 0)).empty());
}

TEST(PruneRulesTest, PeriodKeysUseIsoWeeks) {
  EXPECT_EQ(PeriodKey(KeepReason::kWeekly, T("2026-12-31T12:00:00Z"), true), "2026/53");
  EXPECT_EQ(PeriodKey(KeepReason::kWeekly, T("2027-01-03T23:59:59Z"), true), "2026/53");
  EXPECT_EQ(PeriodKey(KeepReason::kWeekly, T("2027-01-04T00:00:00Z"), true), "2027/01");
  // The ISO year can be ahead of the calendar year, too.
  EXPECT_EQ(PeriodKey(KeepReason::kWeekly, T("2024-12-30T00:00:00Z"), true), "2025/01");
  EXPECT_EQ(PeriodKey(KeepReason::kHourly, T("2026-11-30T05:59:59Z"), true), "2026/11/30/05");
  EXPECT_EQ(PeriodKey(KeepReason::kDaily, T("2026-11-30T05:00:00Z"), true), "2026/11/30");
  EXPECT_EQ(PeriodKey(KeepReason::kMonthly, T("2026-11-30T05:00:00Z"), true), "2026/11");
  EXPECT_EQ(PeriodKey(KeepReason::kYearly, T("2026-11-30T05:00:00Z"), true), "2026");
}

// Restores TZ when the test ends.
class ScopedTz {
 public:
  explicit ScopedTz(const char* tz) {
    if (const char* old = getenv("TZ")) old_ = old;
    had_ = getenv("TZ") != nullptr;
    setenv("TZ", tz, 1);
    tzset();
  }
  ~ScopedTz() {
    if (had_) {
      setenv("TZ", old_.c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }

 private:
  bool had_ = false;
  std::string old_;
};

TEST(PruneRulesTest, LocalTimeByDefault) {
  ScopedTz tz("EST5");  // POSIX form, UTC-5 all year: needs no zoneinfo files
  const int64_t t = T("2026-01-02T03:00:00Z");  // 2026-01-01 22:00 in EST
  EXPECT_EQ(PeriodKey(KeepReason::kDaily, t, /*utc=*/false), "2026/01/01");
  EXPECT_EQ(PeriodKey(KeepReason::kDaily, t, /*utc=*/true), "2026/01/02");
  // Two snapshots on one local day but on two UTC days.
  std::vector<PruneCandidate> in = {{t, false}, {T("2026-01-01T20:00:00Z"), false}};
  KeepOptions local;
  local.daily = 5;
  auto out = ComputePrune(in, local);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].reason, KeepReason::kDaily);
  EXPECT_EQ(out[1].reason, KeepReason::kRemove);
  local.utc = true;
  out = ComputePrune(in, local);
  EXPECT_EQ(out[1].reason, KeepReason::kDaily);
}

// --- snapshot administration on a real datastore -----------------------------------

class PruneStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.Join("store");
    CAIRN_ASSERT_OK(Datastore::Init(*env_, path_));
    auto store = Datastore::Open(*env_, path_);
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
  }

  SnapshotRef Commit(const GroupRef& group, const char* time) {
    SnapshotRef snap{group, T(time)};
    auto w = datastore::SnapshotWriter::Begin(*store_, snap);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return snap;
    CAIRN_EXPECT_OK((*w)->AddBlob("vm.conf.blob", AsBytes(std::string("cores: 4"))));
    CAIRN_EXPECT_OK((*w)->Commit("test"));
    return snap;
  }

  std::vector<std::string> Listed(const GroupRef& group) {
    std::vector<std::string> out;
    auto snaps = store_->ListSnapshots(group);
    EXPECT_TRUE(snaps.ok());
    if (snaps.ok()) {
      for (const auto& s : *snaps) out.push_back(s.TimeString());
    }
    return out;
  }

  bool DirExists(const std::string& dir) { return env_->Stat(dir).ok(); }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  test_util::TempDir dir_;
  std::string path_;
  std::unique_ptr<Datastore> store_;
  GroupRef vm100_{"", "vm", "100"};
  GroupRef vm200_{"", "vm", "200"};
};

TEST_F(PruneStoreTest, ProtectAndUnprotect) {
  SnapshotRef s = Commit(vm100_, "2026-01-01T00:00:00Z");
  EXPECT_EQ(*IsProtected(*store_, s), false);
  CAIRN_ASSERT_OK(SetProtected(*store_, s, true));
  EXPECT_EQ(*IsProtected(*store_, s), true);
  CAIRN_ASSERT_OK(SetProtected(*store_, s, true));  // idempotent
  CAIRN_ASSERT_OK(SetProtected(*store_, s, false));
  EXPECT_EQ(*IsProtected(*store_, s), false);
  CAIRN_ASSERT_OK(SetProtected(*store_, s, false));
  SnapshotRef missing{vm100_, T("2026-01-09T00:00:00Z")};
  EXPECT_EQ(CodeOf(SetProtected(*store_, missing, true)), StatusCode::kNotFound);
  EXPECT_FALSE(DirExists(store_->SnapshotDir(missing)));
}

TEST_F(PruneStoreTest, NotesRoundTripAndLimits) {
  SnapshotRef s = Commit(vm100_, "2026-01-01T00:00:00Z");
  EXPECT_EQ(*ReadNotes(*store_, s), "");
  CAIRN_ASSERT_OK(WriteNotes(*store_, s, "before upgrade to 9.1\nsecond line ü"));
  EXPECT_EQ(*ReadNotes(*store_, s), "before upgrade to 9.1\nsecond line ü");
  EXPECT_EQ(CodeOf(WriteNotes(*store_, s, std::string(kMaxNotesBytes + 1, 'x'))),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(WriteNotes(*store_, s, "bad \xC3\x28 bytes")), StatusCode::kInvalidArgument);
  EXPECT_EQ(CodeOf(WriteNotes(*store_, s, "overlong \xC0\xAF")), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ReadNotes(*store_, s), "before upgrade to 9.1\nsecond line ü");  // unchanged
  CAIRN_ASSERT_OK(WriteNotes(*store_, s, std::string(kMaxNotesBytes, 'y')));
  EXPECT_EQ(ReadNotes(*store_, s)->size(), kMaxNotesBytes);
  CAIRN_ASSERT_OK(WriteNotes(*store_, s, ""));
  EXPECT_EQ(*ReadNotes(*store_, s), "");
  EXPECT_FALSE(DirExists(JoinPath(store_->SnapshotDir(s), kNotesFileName)));
  SnapshotRef missing{vm100_, T("2026-01-09T00:00:00Z")};
  EXPECT_EQ(CodeOf(WriteNotes(*store_, missing, "x")), StatusCode::kNotFound);
}

TEST_F(PruneStoreTest, ForgetRemovesTheDirectory) {
  SnapshotRef a = Commit(vm100_, "2026-01-01T00:00:00Z");
  SnapshotRef b = Commit(vm100_, "2026-01-02T00:00:00Z");
  CAIRN_ASSERT_OK(WriteNotes(*store_, a, "note"));
  CAIRN_ASSERT_OK(ForgetSnapshot(*store_, a));
  EXPECT_FALSE(DirExists(store_->SnapshotDir(a)));
  EXPECT_EQ(Listed(vm100_), std::vector<std::string>{b.TimeString()});
  EXPECT_EQ(CodeOf(ForgetSnapshot(*store_, a)), StatusCode::kNotFound);
}

TEST_F(PruneStoreTest, ForgetRefusesProtected) {
  SnapshotRef a = Commit(vm100_, "2026-01-01T00:00:00Z");
  CAIRN_ASSERT_OK(SetProtected(*store_, a, true));
  Status s = ForgetSnapshot(*store_, a);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("vm/100/2026-01-01T00:00:00Z"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cairn unprotect"), std::string::npos) << s.message();
  EXPECT_EQ(Listed(vm100_).size(), 1u);
  CAIRN_ASSERT_OK(SetProtected(*store_, a, false));
  CAIRN_ASSERT_OK(ForgetSnapshot(*store_, a));
  EXPECT_TRUE(Listed(vm100_).empty());
}

TEST_F(PruneStoreTest, ForgetRefusesSnapshotInUse) {
  SnapshotRef a = Commit(vm100_, "2026-01-01T00:00:00Z");
  {
    auto reader = store_->LockSnapshotShared(a);  // as a restore holds it
    CAIRN_ASSERT_OK(reader);
    EXPECT_EQ(CodeOf(ForgetSnapshot(*store_, a)), StatusCode::kAborted);
    EXPECT_EQ(Listed(vm100_).size(), 1u);
  }
  CAIRN_ASSERT_OK(ForgetSnapshot(*store_, a));
}

TEST_F(PruneStoreTest, PruneRequiresARule) {
  Commit(vm100_, "2026-01-01T00:00:00Z");
  EXPECT_EQ(CodeOf(Prune(*store_, "", vm100_, PruneOptions{})), StatusCode::kInvalidArgument);
  EXPECT_EQ(Listed(vm100_).size(), 1u);
}

TEST_F(PruneStoreTest, PruneGroupDryRunThenForReal) {
  for (const char* t : {"2026-01-01T00:00:00Z", "2026-01-01T12:00:00Z", "2026-01-02T00:00:00Z",
                        "2026-01-03T00:00:00Z", "2026-01-03T06:00:00Z"}) {
    Commit(vm100_, t);
  }
  PruneOptions options;
  options.keep = Keep(0, 0, 2, 0, 0, 0);
  options.dry_run = true;
  auto dry = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(dry);
  EXPECT_EQ(dry->kept, 2u);
  EXPECT_EQ(dry->removed, 3u);
  ASSERT_EQ(dry->groups.size(), 1u);
  ASSERT_EQ(dry->groups[0].snapshots.size(), 5u);
  EXPECT_EQ(dry->groups[0].snapshots[0].outcome, PruneOutcome::kKept);
  EXPECT_EQ(dry->groups[0].snapshots[1].outcome, PruneOutcome::kWouldRemove);
  EXPECT_EQ(Listed(vm100_).size(), 5u);

  options.dry_run = false;
  auto real = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(real);
  EXPECT_EQ(real->kept, 2u);
  EXPECT_EQ(real->removed, 3u);
  EXPECT_EQ(real->groups[0].snapshots[1].outcome, PruneOutcome::kRemoved);
  EXPECT_EQ(Listed(vm100_),
            (std::vector<std::string>{"2026-01-02T00:00:00Z", "2026-01-03T06:00:00Z"}));
}

TEST_F(PruneStoreTest, PruneKeepsSnapshotsInUseAndProtected) {
  SnapshotRef a = Commit(vm100_, "2026-01-01T00:00:00Z");
  SnapshotRef b = Commit(vm100_, "2026-01-02T00:00:00Z");
  Commit(vm100_, "2026-01-03T00:00:00Z");
  CAIRN_ASSERT_OK(SetProtected(*store_, a, true));
  auto reader = store_->LockSnapshotShared(b);
  CAIRN_ASSERT_OK(reader);
  PruneOptions options;
  options.keep = Keep(1, 0, 0, 0, 0, 0);
  auto r = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->kept, 2u);  // the newest (last) and a (protected)
  EXPECT_EQ(r->in_use, 1u);
  EXPECT_EQ(r->removed, 0u);
  const auto& snaps = r->groups[0].snapshots;
  ASSERT_EQ(snaps.size(), 3u);
  EXPECT_EQ(snaps[1].outcome, PruneOutcome::kInUse);
  EXPECT_NE(snaps[1].detail.find("in use"), std::string::npos) << snaps[1].detail;
  EXPECT_EQ(snaps[2].reason, KeepReason::kProtected);
  EXPECT_EQ(Listed(vm100_).size(), 3u);
  reader->reset();
  r = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed, 1u);
  EXPECT_EQ(Listed(vm100_),
            (std::vector<std::string>{"2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"}));
}

TEST_F(PruneStoreTest, PruneRemovesUnfinishedUnlessABackupRuns) {
  Commit(vm100_, "2026-01-01T00:00:00Z");
  const std::string unfinished = JoinPath(store_->GroupDir(vm100_), "2026-01-05T00:00:00Z");
  CAIRN_ASSERT_OK(env_->CreateDir(unfinished));
  test_util::WriteFileOrFail(JoinPath(unfinished, "disk0.img.fidx.tmp"), AsBytes(std::string("x")));
  PruneOptions options;
  options.keep = Keep(5, 0, 0, 0, 0, 0);
  {
    auto backup = store_->LockGroup(vm100_);  // a running backup
    CAIRN_ASSERT_OK(backup);
    auto r = Prune(*store_, "", vm100_, options);
    CAIRN_ASSERT_OK(r);
    ASSERT_EQ(r->groups[0].unfinished.size(), 1u);
    EXPECT_EQ(r->groups[0].unfinished[0].outcome, PruneOutcome::kInUse);
    EXPECT_EQ(r->unfinished_removed, 0u);
    EXPECT_TRUE(DirExists(unfinished));
  }
  options.dry_run = true;
  auto dry = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(dry);
  EXPECT_EQ(dry->unfinished_removed, 1u);
  EXPECT_TRUE(DirExists(unfinished));
  options.dry_run = false;
  auto r = Prune(*store_, "", vm100_, options);
  CAIRN_ASSERT_OK(r);
  ASSERT_EQ(r->groups[0].unfinished.size(), 1u);
  EXPECT_EQ(r->groups[0].unfinished[0].name, "2026-01-05T00:00:00Z");
  EXPECT_EQ(r->groups[0].unfinished[0].outcome, PruneOutcome::kRemoved);
  EXPECT_FALSE(DirExists(unfinished));
  EXPECT_EQ(Listed(vm100_).size(), 1u);
}

TEST_F(PruneStoreTest, PruneEveryGroupOfANamespace) {
  GroupRef other_ns{"site1", "vm", "100"};
  for (const GroupRef& g : {vm100_, vm200_, other_ns}) {
    Commit(g, "2026-01-01T00:00:00Z");
    Commit(g, "2026-01-02T00:00:00Z");
  }
  PruneOptions options;
  options.keep = Keep(1, 0, 0, 0, 0, 0);
  auto r = Prune(*store_, "", std::nullopt, options);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->groups.size(), 2u);
  EXPECT_EQ(r->removed, 2u);
  EXPECT_EQ(Listed(vm100_).size(), 1u);
  EXPECT_EQ(Listed(vm200_).size(), 1u);
  EXPECT_EQ(Listed(other_ns).size(), 2u);  // another namespace: untouched
  r = Prune(*store_, "site1", std::nullopt, options);
  CAIRN_ASSERT_OK(r);
  EXPECT_EQ(r->removed, 1u);
  EXPECT_EQ(Listed(other_ns).size(), 1u);
}

}  // namespace
}  // namespace cairn::maintenance
