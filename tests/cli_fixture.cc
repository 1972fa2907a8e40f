#include "cli_fixture.h"

#include <cstdio>

namespace cairn::cli_test {

std::string SnapTime(int seconds) {
  // 2026-01-01T00:00:00Z; tests stay within one day.
  int h = seconds / 3600, m = seconds / 60 % 60, s = seconds % 60;
  char buf[32];
  std::snprintf(buf, sizeof buf, "2026-01-01T%02d:%02d:%02dZ", h, m, s);
  return buf;
}

void CliTest::SetUp() {
  store_ = tmp_.Join("store");
  RunResult r = Cairn({"init", store_});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
}

RunResult CliTest::OnStore(const std::string& verb, std::vector<std::string> args,
                           const RunOptions& options) const {
  args.insert(args.begin(), {verb, "-r", store_});
  return RunCairn(args, options);
}

nlohmann::json CliTest::Backup(const std::string& id, int t, std::vector<std::string> archives,
                               bool json) const {
  std::vector<std::string> args = {"--id", id, "--time", SnapTime(t)};
  if (json) args.push_back("--json");
  args.insert(args.end(), archives.begin(), archives.end());
  RunResult r = OnStore("backup", args);
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  if (r.exit_code != kExitOk || !json) return nullptr;
  return ParseJson(r.out);
}

nlohmann::json CliTest::SnapshotsJson() const {
  RunResult r = OnStore("snapshots", {"--json"});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  if (r.exit_code != kExitOk) return nullptr;
  return ParseJson(r.out);
}

std::vector<std::string> CliTest::ListedSnapshots() const {
  std::vector<std::string> names;
  nlohmann::json j = SnapshotsJson();
  if (!j.is_array()) {
    ADD_FAILURE() << "snapshots --json is not an array: " << j.dump();
    return names;
  }
  for (const auto& s : j) names.push_back(s.value("snapshot", ""));
  return names;
}

}  // namespace cairn::cli_test
