#include "verify/verify.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "datastore/snapshot_writer.h"
#include "verify/ledger.h"
#include "tests/unit_test_util.h"

namespace cairn::verify {
namespace {

using datastore::SnapshotRef;
using test_util::CodeOf;

constexpr int64_t kT0 = 1796014800;  // 2026-11-30T05:00:00Z
constexpr uint32_t kChunk = index::kMinChunkSize;

// Two snapshots of vm/100 sharing chunks, plus one of ct/7:
//   T0: disk0.img = [A, B, zero, C], vm.conf.blob
//   T1: disk0.img = [A, D, zero, C]
//   ct/7 T0: root.img = [E]
class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CAIRN_ASSERT_OK(datastore::Datastore::Init(*env_, dir_.path()));
    auto store = datastore::Datastore::Open(*env_, dir_.path());
    CAIRN_ASSERT_OK(store);
    store_ = std::move(*store);
    a_ = Put(test_util::RandomBytes(kChunk, 1));
    b_ = Put(test_util::RandomBytes(kChunk, 2));
    zero_ = Put(Bytes(kChunk, 0));
    c_ = Put(test_util::RandomBytes(kChunk / 2, 3));
    d_ = Put(test_util::RandomBytes(kChunk, 4));
    e_ = Put(test_util::RandomBytes(100, 5));
    Commit(t0_, {a_, b_, zero_, c_}, 3 * kChunk + kChunk / 2, true);
    Commit(t1_, {a_, d_, zero_, c_}, 3 * kChunk + kChunk / 2, false);
    Commit(ct_, {e_}, 100, false, "root.img");
  }

  crypto::Digest Put(const Bytes& plain) {
    crypto::Digest id = crypto::Sha256(plain);
    auto stored = blob::Encode(plain);
    EXPECT_TRUE(stored.ok());
    EXPECT_TRUE(store_->chunks().Insert(id, *stored).ok());
    return id;
  }

  void Commit(const SnapshotRef& snap, std::vector<crypto::Digest> ids, uint64_t size,
              bool with_blob, const std::string& name = "disk0.img") {
    auto w = datastore::SnapshotWriter::Begin(*store_, snap);
    CAIRN_ASSERT_OK(w);
    CAIRN_ASSERT_OK((*w)->AddImage(name, index::FixedIndex(size, kChunk, std::move(ids))));
    if (with_blob) CAIRN_ASSERT_OK((*w)->AddBlob("vm.conf.blob", AsBytes("cores: 2\n")));
    CAIRN_ASSERT_OK((*w)->Commit("test"));
  }

  Result<VerifyReport> Run(std::vector<SnapshotRef> snaps = {}, bool record = true) {
    return RunWith(VerifyOptions{}, std::move(snaps), record);
  }
  Result<VerifyReport> RunWith(VerifyOptions options, std::vector<SnapshotRef> snaps = {},
                               bool record = true) {
    options.snapshots = std::move(snaps);
    options.record_state = record;
    options.logger = logger_.get();
    return RunVerify(*store_, options);
  }

  // Records in the ledger that `ids` were found ok at `time`.
  void CheckedAt(const std::vector<crypto::Digest>& ids, int64_t time) {
    auto ledger = Ledger::Open(*env_, store_->path(), nullptr);
    CAIRN_ASSERT_OK(ledger);
    std::vector<LedgerEntry> batch;
    for (const auto& id : ids) batch.push_back(LedgerEntry{id, time, ChunkVerdict::kOk});
    CAIRN_ASSERT_OK((*ledger)->Append(batch));
  }

  uint64_t InodeOf(const crypto::Digest& id) {
    struct stat st;
    EXPECT_EQ(::stat(store_->chunks().ChunkPath(id).c_str(), &st), 0);
    return st.st_ino;
  }

  const SnapshotResult* ResultOf(const VerifyReport& r, const SnapshotRef& s) {
    for (const auto& x : r.snapshots) {
      if (x.snapshot == s) return &x;
    }
    ADD_FAILURE() << "no result for " << s.ToString();
    return nullptr;
  }

  std::string Label(const SnapshotRef& s, std::string_view archive = "disk0.img") {
    return s.ToString() + " " + std::string(archive);
  }

  std::unique_ptr<Env> env_ = NewPosixEnv();
  std::unique_ptr<Logger> logger_ = NewNullLogger();
  test_util::TempDir dir_;
  std::unique_ptr<datastore::Datastore> store_;
  SnapshotRef t0_{{"", "vm", "100"}, kT0};
  SnapshotRef t1_{{"", "vm", "100"}, kT0 + 3600};
  SnapshotRef ct_{{"", "ct", "7"}, kT0};
  crypto::Digest a_, b_, zero_, c_, d_, e_;
};

TEST_F(VerifyTest, CleanStoreVerifiesAndRecordsOk) {
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_TRUE(report->problems.empty());
  ASSERT_EQ(report->snapshots.size(), 3u);
  for (const auto& s : report->snapshots) EXPECT_TRUE(s.ok) << s.snapshot.ToString();
  EXPECT_EQ(report->unique_chunks, 6u);  // A, B, zero, C, D, E: each read once
  EXPECT_EQ(ResultOf(*report, t0_)->chunks, 4u);
  EXPECT_EQ(report->raw_bytes, 4u * kChunk + kChunk / 2 + 100);
  for (const SnapshotRef& s : {t0_, t1_, ct_}) {
    auto state = store_->ReadVerifyState(s);
    ASSERT_TRUE(state.has_value()) << s.ToString();
    EXPECT_EQ(state->outcome, datastore::VerifyOutcome::kOk);
    EXPECT_EQ(state->errors, 0u);
    EXPECT_GT(state->time, 0);
  }
  CAIRN_EXPECT_OK(store_->ReadManifest(t0_));  // recording state keeps the manifest valid
}

TEST_F(VerifyTest, BitFlippedChunkNamesChunkAndEveryAffectedArchive) {
  std::string path = store_->chunks().ChunkPath(a_);
  Bytes stored = test_util::ReadFileOrFail(path);
  stored[stored.size() / 2] ^= 0x04;
  test_util::WriteFileOrFail(path, stored);

  auto report = Run();
  CAIRN_ASSERT_OK(report);
  EXPECT_FALSE(report->ok());
  ASSERT_EQ(report->problems.size(), 1u);
  const Problem& p = report->problems[0];
  EXPECT_NE(p.what.find(crypto::DigestHex(a_)), std::string::npos) << p.what;
  EXPECT_FALSE(p.missing);
  EXPECT_NE(p.error.find("CRC"), std::string::npos) << p.error;
  EXPECT_EQ(p.affected, (std::vector<std::string>{Label(t0_), Label(t1_)}));
  using Ranges = std::vector<std::pair<uint64_t, uint32_t>>;
  EXPECT_EQ(p.ranges, (std::vector<Ranges>{{{0, kChunk}}, {{0, kChunk}}}));  // A at 0 in both
  EXPECT_FALSE(ResultOf(*report, t0_)->ok);
  EXPECT_FALSE(ResultOf(*report, t1_)->ok);
  EXPECT_TRUE(ResultOf(*report, ct_)->ok);

  auto state = store_->ReadVerifyState(t0_);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->outcome, datastore::VerifyOutcome::kFailed);
  EXPECT_EQ(state->errors, 1u);
  auto ct_state = store_->ReadVerifyState(ct_);
  ASSERT_TRUE(ct_state.has_value());
  EXPECT_EQ(ct_state->outcome, datastore::VerifyOutcome::kOk);
}

TEST_F(VerifyTest, MissingChunkIsReportedAsMissing) {
  ASSERT_EQ(::unlink(store_->chunks().ChunkPath(d_).c_str()), 0);
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  ASSERT_EQ(report->problems.size(), 1u);
  const Problem& p = report->problems[0];
  EXPECT_TRUE(p.missing);
  EXPECT_NE(p.what.find(crypto::DigestHex(d_)), std::string::npos);
  EXPECT_EQ(p.affected, (std::vector<std::string>{Label(t1_)}));
  EXPECT_TRUE(ResultOf(*report, t0_)->ok);
  EXPECT_FALSE(ResultOf(*report, t1_)->ok);
  EXPECT_EQ(store_->ReadVerifyState(t1_)->outcome, datastore::VerifyOutcome::kFailed);
  EXPECT_EQ(store_->ReadVerifyState(t0_)->outcome, datastore::VerifyOutcome::kOk);
}

TEST_F(VerifyTest, ChunkWithWrongContentIsDetected) {
  // A valid blob of other data under B's name: only SHA-256 can tell.
  auto other = blob::Encode(test_util::RandomBytes(kChunk, 99));
  CAIRN_ASSERT_OK(other);
  test_util::WriteFileOrFail(store_->chunks().ChunkPath(b_), *other);
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_NE(report->problems[0].what.find(crypto::DigestHex(b_)), std::string::npos);
  EXPECT_EQ(report->problems[0].affected, (std::vector<std::string>{Label(t0_)}));
}

TEST_F(VerifyTest, TruncatedIndexNamesIndexAndSnapshot) {
  std::string fidx = JoinPath(store_->SnapshotDir(t1_), "disk0.img.fidx");
  ASSERT_EQ(::truncate(fidx.c_str(), 4096 + 32 * 3 + 10), 0);
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  EXPECT_FALSE(report->ok());
  ASSERT_EQ(report->problems.size(), 1u);
  const Problem& p = report->problems[0];
  EXPECT_NE(p.what.find("disk0.img.fidx"), std::string::npos) << p.what;
  EXPECT_EQ(p.affected, (std::vector<std::string>{Label(t1_)}));
  EXPECT_FALSE(ResultOf(*report, t1_)->ok);
  EXPECT_TRUE(ResultOf(*report, t0_)->ok);
  EXPECT_EQ(store_->ReadVerifyState(t1_)->outcome, datastore::VerifyOutcome::kFailed);
}

TEST_F(VerifyTest, CorruptManifestAndBlobAreReported) {
  std::string manifest = JoinPath(store_->SnapshotDir(t1_), index::kManifestFileName);
  Bytes m = test_util::ReadFileOrFail(manifest);
  m[m.size() - 5] ^= 0x40;
  test_util::WriteFileOrFail(manifest, m);
  std::string conf = JoinPath(store_->SnapshotDir(t0_), "vm.conf.blob");
  Bytes c = test_util::ReadFileOrFail(conf);
  c.back() ^= 1;
  test_util::WriteFileOrFail(conf, c);

  auto report = Run();
  CAIRN_ASSERT_OK(report);
  ASSERT_EQ(report->problems.size(), 2u);
  bool saw_manifest = false;
  bool saw_blob = false;
  for (const auto& p : report->problems) {
    if (p.what.find("manifest") != std::string::npos) {
      saw_manifest = true;
      EXPECT_EQ(p.affected, (std::vector<std::string>{t1_.ToString()}));
    }
    if (p.what.find("vm.conf.blob") != std::string::npos) {
      saw_blob = true;
      EXPECT_EQ(p.affected, (std::vector<std::string>{Label(t0_, "vm.conf.blob")}));
    }
  }
  EXPECT_TRUE(saw_manifest);
  EXPECT_TRUE(saw_blob);
  EXPECT_FALSE(ResultOf(*report, t0_)->ok);
  EXPECT_FALSE(ResultOf(*report, t1_)->ok);
  EXPECT_TRUE(ResultOf(*report, ct_)->ok);
}

TEST_F(VerifyTest, IdUsedAtTwoLengthsIsDamage) {
  // An index whose short tail claims the id of a full chunk: every chunk
  // file is intact, but restoring it would write the wrong bytes.
  SnapshotRef odd{{"", "host", "h1"}, kT0};
  Commit(odd, {a_, a_}, kChunk + 1000, false);
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  ASSERT_EQ(report->problems.size(), 1u);
  EXPECT_NE(report->problems[0].what.find(crypto::DigestHex(a_)), std::string::npos);
  EXPECT_EQ(report->problems[0].affected, (std::vector<std::string>{Label(odd)}));
  EXPECT_FALSE(ResultOf(*report, odd)->ok);
  EXPECT_TRUE(ResultOf(*report, t0_)->ok);
  EXPECT_TRUE(ResultOf(*report, t1_)->ok);
}

TEST_F(VerifyTest, SelectedSnapshotsOnly) {
  ASSERT_EQ(::unlink(store_->chunks().ChunkPath(d_).c_str()), 0);  // only T1 uses D
  auto report = Run({t0_, ct_});
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->snapshots.size(), 2u);
  EXPECT_FALSE(store_->ReadVerifyState(t1_).has_value());
}

TEST_F(VerifyTest, RecordStateCanBeTurnedOff) {
  auto report = Run({}, /*record=*/false);
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_FALSE(store_->ReadVerifyState(t0_).has_value());
}

TEST_F(VerifyTest, LaterCleanRunRecordsOkAgain) {
  std::string path = store_->chunks().ChunkPath(e_);
  Bytes good = test_util::ReadFileOrFail(path);
  Bytes bad = good;
  bad[0] ^= 1;
  test_util::WriteFileOrFail(path, bad);
  CAIRN_ASSERT_OK(Run());
  EXPECT_EQ(store_->ReadVerifyState(ct_)->outcome, datastore::VerifyOutcome::kFailed);
  test_util::WriteFileOrFail(path, good);
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(store_->ReadVerifyState(ct_)->outcome, datastore::VerifyOutcome::kOk);
}

TEST_F(VerifyTest, LedgerSkipsChunksFoundOkRecently) {
  CAIRN_ASSERT_OK(Run());
  VerifyOptions options;
  options.outdated_after_s = 3600;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->checked_chunks, 0u);
  EXPECT_EQ(report->fresh_chunks, 6u);
  EXPECT_EQ(report->fresh_bytes, report->selected_bytes);
  EXPECT_EQ(report->left_chunks, 0u);
  for (const auto& s : report->snapshots) EXPECT_TRUE(s.ok && s.complete);
}

TEST_F(VerifyTest, ABadChunkIsCheckedAgainDespiteTheLedger) {
  std::string path = store_->chunks().ChunkPath(b_);
  Bytes stored = test_util::ReadFileOrFail(path);
  stored[70] ^= 1;
  test_util::WriteFileOrFail(path, stored);
  VerifyOptions options;
  options.quarantine = false;
  auto first = RunWith(options);
  CAIRN_ASSERT_OK(first);
  EXPECT_EQ(first->problems.size(), 1u);
  options.outdated_after_s = 3600;
  auto second = RunWith(options);
  CAIRN_ASSERT_OK(second);
  EXPECT_EQ(second->checked_chunks, 1u);  // only B: the others were ok
  EXPECT_EQ(second->problems.size(), 1u);
}

TEST_F(VerifyTest, ASliceLeavesTheRestAndTheNextRunResumes) {
  VerifyOptions options;
  options.budget = 0.3;
  options.scope = "everything";
  auto slice = RunWith(options);
  CAIRN_ASSERT_OK(slice);
  EXPECT_TRUE(slice->ok());
  EXPECT_GT(slice->checked_chunks, 0u);
  EXPECT_GT(slice->left_chunks, 0u);
  EXPECT_EQ(slice->checked_chunks + slice->left_chunks, 6u);
  size_t incomplete = 0;
  for (const auto& s : slice->snapshots) incomplete += !s.complete;
  EXPECT_GT(incomplete, 0u);
  for (const auto& s : slice->snapshots) {
    if (!s.complete) {
      EXPECT_FALSE(store_->ReadVerifyState(s.snapshot).has_value());  // not judged yet
    }
  }

  VerifyOptions rest;
  rest.scope = "everything";
  auto resumed = RunWith(rest);
  CAIRN_ASSERT_OK(resumed);
  EXPECT_GT(resumed->resumed_from, 0);
  EXPECT_EQ(resumed->resumed_chunks, slice->checked_chunks);
  EXPECT_EQ(resumed->checked_chunks, slice->left_chunks);
  EXPECT_EQ(resumed->left_chunks, 0u);
  for (const auto& s : resumed->snapshots) {
    EXPECT_TRUE(s.ok && s.complete);
    ASSERT_TRUE(store_->ReadVerifyState(s.snapshot).has_value());
  }
  // Finished: the run after that starts afresh.
  auto fresh = RunWith(rest);
  CAIRN_ASSERT_OK(fresh);
  EXPECT_EQ(fresh->resumed_from, 0);
  EXPECT_EQ(fresh->checked_chunks, 6u);
}

TEST_F(VerifyTest, AnotherScopeDoesNotResume) {
  VerifyOptions options;
  options.budget = 0.3;
  options.scope = "vm/100";
  CAIRN_ASSERT_OK(RunWith(options));
  VerifyOptions other;
  other.scope = "ct/7";
  auto report = RunWith(other);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->resumed_from, 0);
  EXPECT_EQ(report->checked_chunks, 6u);
}

TEST_F(VerifyTest, ATimeSliceStopsStartingChunks) {
  VerifyOptions options;
  options.max_duration_ns = 1;  // over at once: the first chunk, and no other
  options.use_ledger = false;   // no job to resume: every round starts afresh
  // With reads in flight together, a chunk started before the cut must
  // still be checked (it was dropped when the pipeline was cancelled,
  // unless its check won the race).
  for (int jobs : {1, 4, 0}) {
    for (int round = 0; round < 5; ++round) {
      options.jobs = jobs;
      auto report = RunWith(options);
      CAIRN_ASSERT_OK(report);
      EXPECT_TRUE(report->ok());
      EXPECT_EQ(report->checked_chunks, 1u) << "--jobs " << jobs;
      EXPECT_EQ(report->left_chunks, 5u) << "--jobs " << jobs;
    }
  }
}

TEST_F(VerifyTest, ASnapshotRemovedDuringTheRunIsDroppedQuietly) {
  std::filesystem::remove_all(store_->SnapshotDir(t1_));
  auto report = Run({t0_, t1_});
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  ASSERT_EQ(report->snapshots.size(), 1u);
  EXPECT_EQ(report->snapshots[0].snapshot, t0_);
}

TEST_F(VerifyTest, WithoutTheLedgerNothingIsRecorded) {
  VerifyOptions options;
  options.use_ledger = false;
  CAIRN_ASSERT_OK(RunWith(options));
  EXPECT_FALSE(std::filesystem::exists(JoinPath(store_->path(), ".ledger")));
}

TEST_F(VerifyTest, InodeOrderReadsChunksByInode) {
  std::vector<crypto::Digest> all = {a_, b_, zero_, c_, d_, e_};
  std::vector<std::pair<uint64_t, crypto::Digest>> by_inode;
  for (const auto& id : all) by_inode.emplace_back(InodeOf(id), id);
  std::sort(by_inode.begin(), by_inode.end());
  std::vector<crypto::Digest> expected;
  for (const auto& [inode, id] : by_inode) expected.push_back(id);

  std::vector<crypto::Digest> planned;
  VerifyOptions options;
  options.order = ChunkOrder::kInode;
  options.planned_reads = &planned;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->order, ChunkOrder::kInode);
  EXPECT_EQ(report->checked_chunks, 6u);
  EXPECT_EQ(planned, expected);

  planned.clear();
  options.order = ChunkOrder::kId;
  report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->order, ChunkOrder::kId);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(planned, all);
}

TEST_F(VerifyTest, InodeOrderComesAfterTheSlice) {
  // Stalest first picks the slice (never checked: e; then the oldest:
  // a, zero); inode order only arranges what was picked.
  const int64_t now = env_->NowUnixSeconds();
  CheckedAt({a_}, now - 500);
  CheckedAt({zero_}, now - 400);
  CheckedAt({b_, c_, d_}, now - 100);
  std::vector<crypto::Digest> planned;
  VerifyOptions options;
  options.order = ChunkOrder::kInode;
  // e, a and zero: 2 chunks and 100 bytes of the selection.
  options.budget = (2.0 * kChunk + 100.5) / static_cast<double>(4 * kChunk + kChunk / 2 + 100);
  options.planned_reads = &planned;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->checked_chunks, 3u);
  EXPECT_EQ(std::set<crypto::Digest>(planned.begin(), planned.end()),
            (std::set<crypto::Digest>{e_, a_, zero_}));
  ASSERT_EQ(planned.size(), 3u);
  EXPECT_LE(InodeOf(planned[0]), InodeOf(planned[1]));
  EXPECT_LE(InodeOf(planned[1]), InodeOf(planned[2]));
}

TEST_F(VerifyTest, AutoOrderResolvesToIdOrInode) {
  auto report = Run();
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->order,
            IsRotational(store_->chunks().dir()) ? ChunkOrder::kInode : ChunkOrder::kId);
  // A custom source's layout is unknown: id order, whatever was asked.
  VerifyOptions options;
  options.order = ChunkOrder::kInode;
  options.source = &store_->chunks();
  report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->order, ChunkOrder::kId);
}

TEST_F(VerifyTest, ChunkOrderNamesRoundTrip) {
  for (ChunkOrder o : {ChunkOrder::kAuto, ChunkOrder::kId, ChunkOrder::kInode}) {
    auto parsed = ParseChunkOrder(ChunkOrderName(o));
    CAIRN_ASSERT_OK(parsed);
    EXPECT_EQ(*parsed, o);
  }
  EXPECT_EQ(CodeOf(ParseChunkOrder("disk")), StatusCode::kInvalidArgument);
}

TEST_F(VerifyTest, RotationalDetectionNeverFails) {
  // tmpfs has no block device behind it: not rotational.
  if (std::filesystem::exists("/dev/shm")) {
    EXPECT_FALSE(IsRotational("/dev/shm"));
  }
  EXPECT_FALSE(IsRotational(dir_.Join("no-such-dir")));
  IsRotational("/");  // a real disk, or not: any answer, no failure
  IsRotational(dir_.path());
}

TEST_F(VerifyTest, CoverDaysChecksEveryDueChunkPastTheBudget) {
  // A 3-day promise: a, b and zero were checked 2.5 days ago and e never,
  // so they are due; c and d were checked an hour ago.
  const int64_t now = env_->NowUnixSeconds();
  CheckedAt({a_, b_, zero_}, now - 60 * 3600);
  CheckedAt({c_, d_}, now - 3600);
  std::vector<crypto::Digest> planned;
  VerifyOptions options;
  options.budget = 0.01;
  options.cover_days = 3;
  options.planned_reads = &planned;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->due_chunks, 4u);
  EXPECT_EQ(report->due_bytes, 3u * kChunk + 100);
  EXPECT_TRUE(report->due_over_limit);
  EXPECT_EQ(report->checked_chunks, 4u);
  EXPECT_EQ(std::set<crypto::Digest>(planned.begin(), planned.end()),
            (std::set<crypto::Digest>{a_, b_, zero_, e_}));
  EXPECT_EQ(report->left_chunks, 2u);
  EXPECT_EQ(report->covered_chunks, 6u);
  EXPECT_EQ(report->never_checked_chunks, 0u);
  // The due chunks are the most any day needs: c and d fall due in 3 days.
  EXPECT_EQ(report->pace_bytes, report->due_bytes);
}

TEST_F(VerifyTest, CoverDaysOverridesOutdatedAfter) {
  const int64_t now = env_->NowUnixSeconds();
  CheckedAt({a_, b_, zero_, c_, d_, e_}, now - 60 * 3600);
  VerifyOptions options;
  options.outdated_after_s = 7 * 86400;  // would skip all of them
  options.cover_days = 3;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->fresh_chunks, 0u);
  EXPECT_EQ(report->due_chunks, 6u);
  EXPECT_EQ(report->checked_chunks, 6u);
  EXPECT_FALSE(report->due_over_limit) << "no limit given";
}

TEST_F(VerifyTest, CoverDaysAloneChecksTheEvenPace) {
  CAIRN_ASSERT_OK(Run());  // everything checked now: nothing due for two days
  VerifyOptions options;
  options.cover_days = 3;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->due_chunks, 0u);
  EXPECT_EQ(report->pace_bytes, (report->selected_bytes + 2) / 3);
  EXPECT_GE(report->raw_bytes, report->pace_bytes);
  EXPECT_GT(report->checked_chunks, 0u);
  EXPECT_LT(report->checked_chunks, 6u);
  EXPECT_EQ(report->checked_chunks + report->left_chunks, 6u);
  EXPECT_EQ(report->covered_chunks, 6u);
}

TEST_F(VerifyTest, DueChunksIgnoreTheTimeLimit) {
  // Nothing was ever checked: all due, however short the slice.
  VerifyOptions options;
  options.max_duration_ns = 1;
  options.cover_days = 3;
  options.order = ChunkOrder::kInode;
  auto report = RunWith(options);
  CAIRN_ASSERT_OK(report);
  EXPECT_EQ(report->due_chunks, 6u);
  EXPECT_EQ(report->checked_chunks, 6u);
  EXPECT_EQ(report->left_chunks, 0u);
  EXPECT_TRUE(report->due_over_limit);
}

TEST_F(VerifyTest, CoverDaysOutOfRangeIsRefused) {
  VerifyOptions options;
  options.cover_days = -1;
  EXPECT_EQ(CodeOf(RunWith(options)), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::verify
