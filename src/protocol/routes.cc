#include "protocol/routes.h"

#include <fmt/format.h>

#include "base/text.h"

namespace cairn::protocol {

std::string UrlEncode(std::string_view text) { return PercentEncode(text); }

std::string QueryString(const std::vector<std::pair<std::string, std::string>>& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    out += out.empty() ? '?' : '&';
    out += UrlEncode(name);
    out += '=';
    out += UrlEncode(value);
  }
  return out;
}

std::string VersionPath() { return std::string(kApiPrefix) + "/version"; }
std::string StoresPath() { return std::string(kApiPrefix) + "/stores"; }
std::string SpeedTestPath() { return std::string(kApiPrefix) + "/speedtest"; }
std::string SpeedTestPath(uint64_t bytes) {
  return fmt::format("{}/speedtest?bytes={}", kApiPrefix, bytes);
}
std::string StorePath(std::string_view store, std::string_view suffix) {
  return fmt::format("{}/stores/{}{}", kApiPrefix, UrlEncode(store), suffix);
}
std::string ChunksPath(std::string_view store) { return StorePath(store, "/chunks"); }
std::string ChunkPath(std::string_view store, std::string_view hex) {
  return StorePath(store, fmt::format("/chunk/{}", hex));
}
std::string BackupPath(std::string_view store) { return StorePath(store, "/backup"); }
std::string BackupSessionPath(std::string_view store, std::string_view session,
                              std::string_view step) {
  return StorePath(store, fmt::format("/backup/{}{}", UrlEncode(session), step));
}
std::string TasksPath() { return std::string(kApiPrefix) + "/tasks"; }
std::string TaskPath(std::string_view id) {
  return fmt::format("{}/tasks/{}", kApiPrefix, UrlEncode(id));
}
std::string TaskLogPath(std::string_view id, size_t since) {
  return fmt::format("{}/log?since={}", TaskPath(id), since);
}

namespace {

// Splits "/a/b/c" into {"a", "b", "c"}; empty segments are kept so that
// "//" and a trailing "/" do not match any route.
std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.empty() || path[0] != '/') return out;
  path.remove_prefix(1);
  while (true) {
    size_t slash = path.find('/');
    out.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

Route StoreRoute(const std::vector<std::string_view>& seg) {
  // seg: "stores", S, WHAT, …
  Route r;
  r.kind = RouteKind::kStoreOther;
  r.in_store = true;
  r.store = seg[1];
  std::string_view what = seg[2];
  const size_t n = seg.size();
  if (n == 3) {
    if (what == "snapshots") r.kind = RouteKind::kSnapshots;
    if (what == "file") r.kind = RouteKind::kFile;
    if (what == "grant") r.kind = RouteKind::kGrant;
    if (what == "chunks") r.kind = RouteKind::kChunks;
    if (what == "backup") r.kind = RouteKind::kBackupStart;
    if (what == "status") r.kind = RouteKind::kStatus;
    if (what == "prune") r.kind = RouteKind::kPrune;
    if (what == "snapshot") r.kind = RouteKind::kSnapshot;
    if (what == "protected") r.kind = RouteKind::kProtected;
    if (what == "notes") r.kind = RouteKind::kNotes;
    if (what == "sync-jobs") r.kind = RouteKind::kSyncJobs;
    if (what == "tree") r.kind = RouteKind::kTree;
    if (what == "throughput") r.kind = RouteKind::kThroughput;
    if (what == "verify" || what == "gc" || what == "sync") {
      r.kind = RouteKind::kStoreTask;
      r.step = what;
    }
  } else if (n == 4 && what == "chunk") {
    r.kind = RouteKind::kChunk;
    r.id = seg[3];
  } else if (n == 4 && what == "backup") {
    r.kind = RouteKind::kBackupSession;
    r.id = seg[3];
  } else if (n == 5 && what == "backup") {
    r.kind = RouteKind::kBackupStep;
    r.id = seg[3];
    r.step = seg[4];
  }
  return r;
}

}  // namespace

Route ParseRoute(std::string_view path) {
  Route r;
  auto seg = Segments(path);
  if (seg.size() < 2 || seg[0] != "api" || seg[1] != "v1") return r;
  seg.erase(seg.begin(), seg.begin() + 2);
  if (seg.empty()) return r;
  if (seg.size() == 1) {
    if (seg[0] == "version") r.kind = RouteKind::kVersion;
    if (seg[0] == "speedtest") r.kind = RouteKind::kSpeedTest;
    if (seg[0] == "stores") r.kind = RouteKind::kStores;
    if (seg[0] == "tasks") r.kind = RouteKind::kTasks;
    return r;
  }
  if (seg[0] == "stores" && seg.size() >= 3) return StoreRoute(seg);
  if (seg[0] == "tasks" && seg.size() <= 3) {
    r.kind = seg.size() == 2 ? RouteKind::kTask : RouteKind::kTaskSub;
    r.id = seg[1];
    if (seg.size() == 3) r.step = seg[2];
  }
  return r;
}

size_t BodyLimit(const Route& route, std::string_view method, bool may_upload, size_t max_upload) {
  if (route.kind == RouteKind::kSpeedTest) return kSpeedTestMaxBytes;
  if (route.kind == RouteKind::kBackupStep && method == "POST" && may_upload) {
    if (route.step == "chunks" || route.step == "file") return max_upload;
    if (route.step == "finish") return kManifestBodyLimit;
  }
  return kSmallBodyLimit;
}

}  // namespace cairn::protocol
