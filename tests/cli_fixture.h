// The fixture every integration test starts from: a temporary directory
// with a fresh datastore in it, and short ways to run cairn verbs on it.
//
// Thread safety: none; one test, one thread.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "cli_harness.h"

namespace cairn::cli_test {

// Exit codes (DESIGN.md, README "Exit codes"): 0 ok, 1 failure, 2 usage
// error, 3 corruption, 10 no repository, 11 locked by another operation,
// 12 wrong passphrase or key.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitCorruption = 3;
inline constexpr int kExitNoRepository = 10;
inline constexpr int kExitLocked = 11;
inline constexpr int kExitWrongKey = 12;

// "2026-01-01T00:00:00Z" plus `seconds`: explicit, distinct snapshot times,
// so no backup waits for the clock to pass the previous snapshot's second.
std::string SnapTime(int seconds);

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Paths inside the test's temporary directory.
  std::string Path(std::string_view name) const { return tmp_.Join(name); }
  const std::string& store() const { return store_; }

  // cairn ARGS…
  RunResult Cairn(const std::vector<std::string>& args, const RunOptions& options = {}) const {
    return RunCairn(args, options);
  }
  // cairn VERB -r STORE ARGS…
  RunResult OnStore(const std::string& verb, std::vector<std::string> args,
                    const RunOptions& options = {}) const;
  // cairn backup -r STORE --id ID --time SnapTime(t) ARCHIVES… [--json];
  // fails the test unless it exits 0. Returns the parsed JSON report when
  // `json` is set (null otherwise).
  nlohmann::json Backup(const std::string& id, int t, std::vector<std::string> archives,
                        bool json = true) const;
  // "TYPE/ID/TIME" of the snapshot Backup(id, t, …) makes.
  static std::string Snap(const std::string& id, int t) { return id + "/" + SnapTime(t); }
  // cairn snapshots -r STORE --json, parsed; fails the test unless exit 0.
  nlohmann::json SnapshotsJson() const;
  // The snapshot names `snapshots --json` lists.
  std::vector<std::string> ListedSnapshots() const;

  TempDir tmp_;
  std::string store_;
};

}  // namespace cairn::cli_test
