#include "cli_kill.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "cli_background.h"

namespace cairn::cli_test {

namespace fs = std::filesystem;

const char* KillpointBinary() {
  const char* env = std::getenv("CAIRN_KILLPOINT");
  return env != nullptr && *env != '\0' ? env : CAIRN_KILLPOINT;
}

std::string KillpointUnavailableReason() {
  static const std::string reason = [] {
    ShellResult r = Shell(std::string(KillpointBinary()) + " -- true");
    if (r.exit_code == 0) return std::string();
    return "cairn-killpoint cannot trace here (exit " + std::to_string(r.exit_code) +
           "): " + r.output;
  }();
  return reason;
}

RunOptions KillAt(uint64_t at, const std::string& report_path, const std::string& events,
                  RunOptions base) {
  base.wrapper = {KillpointBinary(), "--kill-at", std::to_string(at), "--events", events,
                  "--report", report_path, "--"};
  return base;
}

KillReport ReadKillReport(const std::string& path) {
  KillReport report;
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "no cairn-killpoint report at " << path;
    return report;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("events ", 0) == 0) report.events = std::stoull(line.substr(7));
    if (line.rfind("killed ", 0) == 0) report.killed = line.substr(7) == "1";
    if (line.rfind("last ", 0) == 0) report.last = line.substr(5);
  }
  return report;
}

std::vector<uint64_t> KillPoints(uint64_t total, int n, uint64_t seed) {
  std::vector<uint64_t> points;
  if (total == 0 || n <= 0) return points;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  for (int i = 0; i < n; ++i) {
    const double fraction = (i + u(rng)) / n;
    points.push_back(std::clamp<uint64_t>(1 + static_cast<uint64_t>(fraction * total), 1, total));
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

int KillPointCount(int ci_default) {
  if (const char* env = std::getenv("CAIRN_KILL_POINTS"); env != nullptr && *env != '\0') {
    return std::max(1, std::atoi(env));
  }
  return CairnSanitized() ? std::max(1, ci_default / 2) : ci_default;
}

int MinimumKills(int tried, double share) {
  return std::max(1, static_cast<int>(std::ceil(tried * share)));
}

uint64_t KillSeed(uint64_t fallback) {
  if (const char* env = std::getenv("CAIRN_KILL_SEED"); env != nullptr && *env != '\0') {
    return std::strtoull(env, nullptr, 10);
  }
  return fallback;
}

std::string CompareTrees(const std::string& a, const std::string& b) {
  auto list = [](const std::string& root) {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      names.push_back(fs::relative(it->path(), root).string());
    }
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> left = list(a), right = list(b);
  if (left != right) {
    std::ostringstream msg;
    msg << a << " and " << b << " list different names (" << left.size() << " vs "
        << right.size() << ")";
    for (const auto& n : left) {
      if (!std::binary_search(right.begin(), right.end(), n)) {
        msg << "; only in the first: " << n;
        break;
      }
    }
    for (const auto& n : right) {
      if (!std::binary_search(left.begin(), left.end(), n)) {
        msg << "; only in the second: " << n;
        break;
      }
    }
    return msg.str();
  }
  for (const auto& name : left) {
    const fs::path pa = fs::path(a) / name, pb = fs::path(b) / name;
    const auto ta = fs::symlink_status(pa).type(), tb = fs::symlink_status(pb).type();
    if (ta != tb) return name + ": different types";
    if (ta == fs::file_type::symlink) {
      if (fs::read_symlink(pa) != fs::read_symlink(pb)) return name + ": different symlinks";
    } else if (ta == fs::file_type::regular) {
      std::string diff = CompareFiles(pa.string(), pb.string());
      if (!diff.empty()) return name + ": " + diff;
    }
  }
  return "";
}

void CopyTree(const std::string& src, const std::string& dst) {
  ShellResult r = Shell("cp -a '" + src + "' '" + dst + "'");
  EXPECT_EQ(r.exit_code, 0) << "cp -a " << src << " " << dst << ": " << r.output;
}

void RemoveTree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  EXPECT_FALSE(ec) << "remove " << path << ": " << ec.message();
}

}  // namespace cairn::cli_test
