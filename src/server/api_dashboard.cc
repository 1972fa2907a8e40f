// server::Api: what the web dashboard (server/web/dashboard.h) asks the API
// beyond the CLI's routes (api_request.h has the split). Authorised by the
// same checks as every route: the store was picked for the token already,
// and the role and group ownership are checked here as ListSnapshots does.
#include <ctime>

#include "chunkio/tree_reader.h"
#include "index/manifest.h"
#include "maintenance/snapshot_info.h"
#include "server/api_request.h"
#include "server/metrics.h"
#include "tree/tree_path.h"

namespace cairn::server {

using nlohmann::json;

namespace {

// A file the dashboard downloads is answered in one piece: at most this.
constexpr uint64_t kMaxTreeDownload = uint64_t{256} << 20;
// Entries of one directory listed at most (the rest: "truncated").
constexpr size_t kMaxTreeEntries = 10000;

// A file name for Content-Disposition: the last component, anything but
// A-Z a-z 0-9 . _ - as '_' (no quoting rules to get wrong).
std::string DownloadName(std::string_view path) {
  const size_t slash = path.rfind('/');
  std::string name(path.substr(slash == std::string_view::npos ? 0 : slash + 1));
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name.empty() || name == "." || name == ".." ? "file" : name;
}

}  // namespace

void Request::ListSnapshotDetails() {
  auto snaps = VisibleSnapshots();
  if (!snaps) return;
  json list = json::array();
  for (const datastore::SnapshotRef& snap : *snaps) {
    // Forgotten meanwhile: gone from the listing, as in ListSnapshots.
    if (!api_.env.Stat(JoinPath(store_->SnapshotDir(snap), index::kManifestFileName)).ok()) continue;
    list.push_back(maintenance::SnapshotInfoJson(maintenance::ReadSnapshotInfo(*store_, snap)));
  }
  SendJson(200, json{{"store", store_name_}, {"snapshots", std::move(list)}});
}

// The snapshot browser's tree view. Read with the server's own access to
// the datastore, after the same checks as GET …/file (role, and a backup
// token's own groups): a token that may read the snapshot's index may
// read what it holds. Encrypted snapshots need the client's key: refused.
void Request::Tree() {
  if (!Method("GET") || !Allowed(Action::kRead, "read snapshots")) return;
  auto snap = Snapshot();
  if (!snap) return;
  auto manifest = store_->ReadManifest(*snap);
  if (!manifest.ok()) return SendStatus(manifest.status());
  const std::string archive = Query("archive");
  const index::ArchiveEntry* entry = manifest->Find(archive);
  if (entry == nullptr || entry->kind != index::ArchiveKind::kTree) {
    return SendError(404, fmt::format("snapshot {} has no tree archive '{}'", snap->ToString(),
                                      archive));
  }
  if (manifest->encrypted) {
    return SendError(400, fmt::format("snapshot {} is encrypted and the server has no key: "
                                      "browse it with cairn ls and cairn cat on a client",
                                      snap->ToString()));
  }
  auto reader = chunkio::TreeArchiveReader::Open(*store_, store_->source(), *snap, *entry);
  if (!reader.ok()) return SendStatus(reader.status());
  const std::string path = tree::NormalizeTreePath(Query("path"));
  if (Query("download") == "1") {
    auto e = (*reader)->Find(path);
    if (e.ok() && e->kind == tree::EntryKind::kHardlink) e = (*reader)->Find(e->link_target);
    if (!e.ok()) return SendStatus(e.status());
    if (e->kind != tree::EntryKind::kFile) {
      return SendError(400, fmt::format("{} is a {}, not a regular file", path.empty() ? "/" : path,
                                        tree::EntryKindWord(e->kind)));
    }
    if (e->size > kMaxTreeDownload) {
      return SendError(413, fmt::format("{} is {} bytes; the dashboard downloads at most {}: use "
                                        "cairn cat",
                                        path, e->size, kMaxTreeDownload));
    }
    Bytes data;
    data.reserve(e->size);
    Status read = (*reader)->ReadPayload(e->payload_offset, e->size, [&](ByteSpan piece) {
      data.insert(data.end(), piece.begin(), piece.end());
      return Status::Ok();
    });
    if (!read.ok()) return SendStatus(read);
    return res_.Send(200, "application/octet-stream", std::move(data),
                     {{"Content-Disposition",
                       fmt::format("attachment; filename=\"{}\"", DownloadName(path))}});
  }
  // The directory's own entries (the stream is sorted: a directory's
  // subtree follows it, so the scan stops once past it).
  json entries = json::array();
  bool found = false, truncated = false;
  while (true) {
    auto next = (*reader)->Next();
    if (!next.ok()) return SendStatus(next.status());
    if (!next->has_value()) break;
    const tree::Entry& e = **next;
    if (e.path == path) {
      if (e.kind != tree::EntryKind::kDirectory) {
        return SendError(400, fmt::format("{} is not a directory", path));
      }
      found = true;
      continue;
    }
    const bool below = path.empty() || (e.path.size() > path.size() && e.path.starts_with(path) &&
                                        e.path[path.size()] == '/');
    if (!below) {
      if (found || tree::CompareTreePaths(e.path, path) > 0) break;
      continue;
    }
    const std::string_view rest =
        std::string_view(e.path).substr(path.empty() ? 0 : path.size() + 1);
    if (rest.find('/') != std::string_view::npos) continue;  // deeper
    if (entries.size() == kMaxTreeEntries) {
      truncated = true;
      break;
    }
    entries.push_back({{"name", e.name}, {"path", e.path}, {"kind", tree::EntryKindWord(e.kind)},
                       {"size", e.size}, {"mtime", e.mtime_ns / 1000000000}});
  }
  if (!found) return SendError(404, fmt::format("{} has no directory {}", (*reader)->description(),
                                                path.empty() ? "/" : path));
  SendJson(200, json{{"path", path}, {"entries", std::move(entries)}, {"truncated", truncated}});
}

void Request::Throughput() {
  if (!Method("GET") || !Allowed(Action::kStatus, "read the status")) return;
  json points = json::array();
  if (api_.options.metrics != nullptr) {
    for (const auto& p : api_.options.metrics->Throughput(store_name_, std::time(nullptr))) {
      points.push_back(json::array({p.start_unix, p.in_bytes, p.out_bytes}));
    }
  }
  SendJson(200, json{{"interval_s", ServerMetrics::kThroughputBucketSeconds},
                     {"points", std::move(points)}});
}

}  // namespace cairn::server
