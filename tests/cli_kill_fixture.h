// The fixture of the kill tests (cli_kill_test.cc, cli_server_kill_test.cc)
// over any test base with a store (CliTest, ServerTest): a small source
// tree that changes by version, backups that remember a frozen copy of
// what each snapshot holds, the invariants after a kill (CheckStore) and
// the sweep over seeded kill points of one operation (Sweep).
//
// Thread safety: none; one test, one thread.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli_fixture.h"
#include "cli_kill.h"

namespace cairn::cli_test {

// Kill points per writer in CI (CAIRN_KILL_POINTS=N for the long form).
inline constexpr int kCiKillPoints = 3;

template <class Base>
class KillFixture : public Base {
 protected:
  using Base::HasFailure;
  using Base::HasFatalFailure;
  using Base::IsSkipped;
  using Base::ListedSnapshots;
  using Base::OnStore;
  using Base::Path;
  using Base::RecordProperty;
  using Base::Snap;
  using Base::store;

  void SetUp() override {
    Base::SetUp();
    if (HasFatalFailure()) return;
    if (std::string why = KillpointUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    tree_ = Path("src");
    WriteSourceTree(0);
  }

  // A small tree: config text, a random file of a few chunks, a log, a
  // symlink; `version` changes some of it (new chunks to store).
  void WriteSourceTree(int version) {
    std::filesystem::create_directories(tree_ + "/etc/app");
    std::filesystem::create_directories(tree_ + "/var/data");
    WriteFile(tree_ + "/etc/app/config", "version = " + std::to_string(version) + "\n");
    ImageWriter(tree_ + "/var/data/blob.bin", 1 * kMiB + 123, 1000 + version)
        .Random(0, 1 * kMiB + 123);
    if (version == 0) {
      ImageWriter(tree_ + "/var/data/log.txt", 300000, 7).Text(0, 300000);
      std::error_code ec;
      std::filesystem::create_symlink("etc/app/config", tree_ + "/link", ec);
    }
    WriteFile(tree_ + "/var/data/v" + std::to_string(version), std::string(5000, 'a' + version % 26));
  }

  // backup of the source tree at time t; records a frozen copy of what it
  // holds as the expected content of the snapshot.
  void BackupTree(int t, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--id", "host/web", "--time", SnapTime(t),
                                     "root.tree=" + tree_};
    args.insert(args.end(), extra.begin(), extra.end());
    RunResult r = OnStore("backup", args);
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    Freeze(Snap("host/web", t));
  }
  void Freeze(const std::string& snap) {
    const std::string copy = Path("frozen-" + std::to_string(expected_.size()));
    CopyTree(tree_, copy);
    expected_[snap] = copy;
  }

  // The files of a snapshot's directory but its verify state (written by
  // the checks' verify).
  std::vector<std::string> SnapshotFiles(const std::string& snap) const {
    std::vector<std::string> files = ListDir(SnapshotDir(store(), snap));
    std::erase(files, "verify.json.blob");
    return files;
  }

  // Listed snapshot names.
  std::set<std::string> Listed() {
    std::vector<std::string> v = ListedSnapshots();
    return {v.begin(), v.end()};
  }

  // The invariants after a kill: `must` ⊆ listed ⊆ `may` ∪ `must`; verify
  // clean over everything listed; each listed snapshot restores to its
  // frozen source.
  // `restore` false: the listing and verify only (after a run that
  // completed, where the kill's checks restored everything already).
  void CheckStore(const std::set<std::string>& must, const std::set<std::string>& may,
                  const std::vector<std::string>& key_args = {}, bool restore = true) {
    const std::set<std::string> listed = Listed();
    for (const auto& s : must) EXPECT_TRUE(listed.count(s)) << s << " is gone";
    for (const auto& s : listed) {
      if (s.rfind("host/web/", 0) != 0) continue;  // another test's group (ServerTest's vm/100)
      EXPECT_TRUE(must.count(s) || may.count(s)) << s << " is listed but never finished";
    }
    std::vector<std::string> vargs = {"--json"};
    vargs.insert(vargs.end(), key_args.begin(), key_args.end());
    RunResult v = OnStore("verify", vargs);
    EXPECT_EQ(v.exit_code, kExitOk) << v.Describe();
    if (v.exit_code == kExitOk) {
      nlohmann::json report = ParseJson(v.out);
      EXPECT_EQ(report["ok"], true) << v.out;
      EXPECT_EQ(report["snapshots"].size(), listed.size()) << v.out;
    }
    for (const auto& s : listed) {
      if (!restore) break;
      auto it = expected_.find(s);
      if (it == expected_.end()) continue;  // reported above
      const std::string out = Path("restored");
      RemoveTree(out);
      std::vector<std::string> rargs = {s, "root.tree", out};
      rargs.insert(rargs.end(), key_args.begin(), key_args.end());
      RunResult r = OnStore("restore", rargs);
      EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
      EXPECT_EQ(CompareTrees(it->second, out), "") << s;
    }
  }

  // The sweep. The store as it is now is the starting state of every run:
  // `op()` gives the operation's arguments (cairn VERB -r STORE ARGS…),
  // `after_kill(result)` checks the store after a kill at a point,
  // `finish(result)` runs the operation again as a user would and checks
  // that it completed (it gets the killed run's result). `op_options` add
  // environment entries.
  void Sweep(uint64_t seed, const std::string& verb, const std::vector<std::string>& args,
             const std::function<void()>& after_kill, const std::function<void()>& finish,
             const RunOptions& op_options = {}) {
    Sweep(
        seed, verb, [&](const RunOptions& o) { return OnStore(verb, args, o); }, after_kill,
        finish, op_options);
  }
  // The same for an operation that is not `cairn VERB -r STORE …` (sync,
  // whose DST is the store): `run(options)` runs it once.
  void Sweep(uint64_t seed, const std::string& verb,
             const std::function<RunResult(const RunOptions&)>& run,
             const std::function<void()>& after_kill, const std::function<void()>& finish,
             const RunOptions& op_options = {}) {
    const std::string pristine = Path("pristine");
    CopyTree(store(), pristine);
    const std::string report = Path("killpoint.report");

    // A clean run counts the events; it must pass the same checks.
    RunResult r = run(KillAt(0, report, "file", op_options));
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    const KillReport counted = ReadKillReport(report);
    ASSERT_GT(counted.events, 0u) << verb << " wrote nothing?";
    after_kill();
    finish();
    if (HasFailure()) return;

    const uint64_t s = KillSeed(seed);
    const std::vector<uint64_t> points = KillPoints(counted.events, KillPointCount(kCiKillPoints), s);
    int killed = 0;
    for (uint64_t at : points) {
      SCOPED_TRACE(verb + ": CAIRN_KILL_SEED=" + std::to_string(s) + ", point " +
                   std::to_string(at) + " of " + std::to_string(counted.events));
      RemoveTree(store());
      CopyTree(pristine, store());
      r = run(KillAt(at, report, "file", op_options));
      const KillReport rep = ReadKillReport(report);
      if (r.killed()) {
        ++killed;
        EXPECT_TRUE(rep.killed) << r.Describe();
        SCOPED_TRACE("killed before " + rep.last);
        after_kill();
        finish();
      } else {
        // Threads interleave: a run may have fewer events than the count.
        EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
      }
      if (HasFailure()) return;
    }
    EXPECT_GE(killed, MinimumKills(static_cast<int>(points.size())))
        << killed << " of " << points.size() << " points landed inside the run";
    RecordProperty(verb + "_events", static_cast<int>(counted.events));
    RecordProperty(verb + "_kills", killed);
  }

  std::string tree_;
  std::map<std::string, std::string> expected_;  // snapshot → frozen source
};


}  // namespace cairn::cli_test
