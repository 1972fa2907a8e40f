#include "remote/remote_repo.h"

#include "base/mutex.h"
#include "remote/remote_backend.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "datastore/sync_marker.h"
#include "index/manifest.h"
#include "remote/remote_backend.h"
#include "remote/remote_chunk_source.h"

namespace cairn::remote {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxMirrorFile = uint64_t{1} << 30;

// Files fetched on first open: indexes and blobs. The manifest and the
// verify state come with the snapshot list.
bool IsFetchable(std::string_view name) {
  if (name == index::kManifestFileName || name == datastore::kVerifyStateFileName) return false;
  if (name.empty() || name[0] == '.') return false;
  return name.ends_with(".blob") || name.ends_with(".img.fidx") ||
         name.ends_with(".tree.meta.didx") || name.ends_with(".tree.data.didx");
}

// "ns/a/vm/100/2026-…Z" → (ns "a", "vm/100/2026-…Z"). False when `rel` is
// not a snapshot directory.
bool SplitSnapshotDir(std::string_view rel, std::string* ns, std::string* snapshot) {
  std::vector<std::string_view> parts;
  while (!rel.empty()) {
    size_t slash = rel.find('/');
    parts.push_back(rel.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rel.remove_prefix(slash + 1);
  }
  size_t i = 0;
  ns->clear();
  while (i + 1 < parts.size() && parts[i] == "ns") {
    if (!ns->empty()) *ns += '/';
    *ns += parts[i + 1];
    i += 2;
  }
  if (parts.size() - i != 3) return false;
  *snapshot = fmt::format("{}/{}/{}", parts[i], parts[i + 1], parts[i + 2]);
  return true;
}

Status RemoveSnapshotDir(Env& env, const std::string& dir) {
  auto names = env.ListDir(dir);
  if (!names.ok()) {
    return names.status().code() == StatusCode::kNotFound ? Status::Ok() : names.status();
  }
  // The manifest first: without it the directory is no snapshot.
  env.RemoveFile(JoinPath(dir, index::kManifestFileName)).IgnoreError();
  for (const std::string& name : *names) env.RemoveFile(JoinPath(dir, name)).IgnoreError();
  env.RemoveDir(dir).IgnoreError();
  return Status::Ok();
}

Result<Bytes> Unhex(const json& value, std::string_view what) {
  if (!value.is_string() || value.get_ref<const std::string&>().size() % 2 != 0) {
    return DataLossError(fmt::format("malformed {} in the server's snapshot list", what));
  }
  const std::string& hex = value.get_ref<const std::string&>();
  Bytes out(hex.size() / 2);
  if (!FromHex(hex, out)) {
    return DataLossError(fmt::format("malformed {} in the server's snapshot list", what));
  }
  return out;
}

// Creates the mirror datastore; another process may be doing the same.
Status EnsureMirror(Env& env, const std::string& dir) {
  std::string marker = JoinPath(dir, datastore::kDatastoreMarker);
  if (env.Stat(marker).ok()) return Status::Ok();
  CAIRN_RETURN_IF_ERROR(CreateDirs(env, DirName(dir)));
  Status s = datastore::Datastore::Init(env, dir);
  if (s.ok()) return s;
  // Someone else is creating it: wait for their marker.
  for (int i = 0; i < 600 && s.code() == StatusCode::kAlreadyExists; ++i) {
    if (env.Stat(marker).ok()) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return s.WithContext(fmt::format("client cache {}", dir));
}

}  // namespace

std::string CacheRoot() {
  if (const char* p = std::getenv("CAIRN_CACHE_DIR"); p != nullptr && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x) {
    return std::string(x) + "/cairn";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "/root") + "/.cache/cairn";
}

std::string MirrorDir(const std::string& cache_root, const RemoteUrl& url) {
  std::string host;
  for (char c : url.host) host += (c == ':' ? '_' : c);
  return fmt::format("{}/remote/{}_{}/{}", cache_root, host, url.port, url.store);
}


struct MirrorEnv::Granted {
  Mutex mu;
  // Mirror path → the query of its POST …/grant (empty for a blob: nothing
  // to grant).
  std::map<std::string, std::string> files GUARDED_BY(mu);
};

namespace {

// Grants again every index this process read (after the server restarted
// and forgot them). An index whose snapshot is gone since (pruned) is
// skipped: its chunks are nobody's to read.
Status Regrant(RemoteClient& client, const std::map<std::string, std::string>& files) {
  for (const auto& [path, query] : files) {
    if (query.empty()) continue;
    auto r = client.Call("POST", client.StorePath("/grant" + query));
    if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
  }
  return Status::Ok();
}

}  // namespace

MirrorEnv::MirrorEnv(std::unique_ptr<Env> base, std::shared_ptr<RemoteClient> client,
                     std::string mirror_dir)
    : EnvWrapper(base.get()), base_(std::move(base)), client_(std::move(client)),
      mirror_dir_(std::move(mirror_dir)), granted_(std::make_shared<Granted>()) {
  // The client owns the restorer: a plain pointer back to it is safe.
  client_->SetSessionRestorer([granted = granted_, client = client_.get()] {
    std::map<std::string, std::string> files;
    {
      MutexLock lock(granted->mu);
      files = granted->files;
    }
    return Regrant(*client, files);
  });
}

Status MirrorEnv::MaybeFetch(const std::string& path) {
  if (path.size() <= mirror_dir_.size() + 1 || !path.starts_with(mirror_dir_) ||
      path[mirror_dir_.size()] != '/') {
    return Status::Ok();
  }
  std::string_view rel = std::string_view(path).substr(mirror_dir_.size() + 1);
  size_t slash = rel.rfind('/');
  if (slash == std::string_view::npos) return Status::Ok();
  std::string_view name = rel.substr(slash + 1);
  std::string ns, snapshot;
  if (!IsFetchable(name) || !SplitSnapshotDir(rel.substr(0, slash), &ns, &snapshot)) {
    return Status::Ok();
  }
  const bool index = !name.ends_with(".blob");
  {
    MutexLock lock(granted_->mu);
    if (granted_->files.contains(path)) return Status::Ok();
  }
  const std::string query =
      QueryString({{"ns", ns}, {"snapshot", snapshot}, {"name", std::string(name)}});
  if (base_->Stat(path).ok()) {
    if (!index) return Status::Ok();
    // Cached: the server is told that this client reads it again.
    CAIRN_RETURN_IF_ERROR(client_->Call("POST", client_->StorePath("/grant" + query)).status());
  } else {
    CAIRN_ASSIGN_OR_RETURN(Bytes data, client_->Call("GET", client_->StorePath("/file" + query)));
    CAIRN_RETURN_IF_ERROR(WriteFileReplacing(*base_, path, data));
  }
  MutexLock lock(granted_->mu);
  granted_->files.emplace(path, index ? query : std::string());
  return Status::Ok();
}

Result<std::unique_ptr<ReadableFile>> MirrorEnv::OpenReadable(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(MaybeFetch(path));
  return base_->OpenReadable(path);
}

Result<FileInfo> MirrorEnv::Stat(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(MaybeFetch(path));
  return base_->Stat(path);
}

namespace {

// The protection marker and the notes of a snapshot, as the server's list
// entry gives them (absent: unprotected, no notes), written to or removed
// from its mirror directory so that `snapshots` reads them as locally.
Status MirrorSideFiles(Env& env, const std::string& dir, const json& entry) {
  const std::string marker = JoinPath(dir, datastore::kProtectedFileName);
  const bool is_protected = entry.contains("protected") && entry["protected"].is_boolean() &&
                            entry["protected"].get<bool>();
  if (is_protected != env.Stat(marker).ok()) {
    CAIRN_RETURN_IF_ERROR(is_protected ? WriteFileReplacing(env, marker, Bytes{})
                                       : env.RemoveFile(marker));
  }
  const std::string notes_path = JoinPath(dir, datastore::kNotesFileName);
  std::string notes;
  if (entry.contains("notes")) {
    if (!entry["notes"].is_string()) return DataLossError("malformed notes in the server's list");
    notes = entry["notes"].get<std::string>();
  }
  auto old = ReadWholeFile(env, notes_path, kMaxMirrorFile);
  if (notes.empty()) {
    if (old.ok()) CAIRN_RETURN_IF_ERROR(env.RemoveFile(notes_path));
  } else if (!old.ok() || AsStringView(*old) != notes) {
    CAIRN_RETURN_IF_ERROR(WriteFileReplacing(env, notes_path, AsBytes(notes)));
  }
  // The sync marker, as the source it names (sync's --remove-vanished).
  const std::string sync_path = JoinPath(dir, datastore::kSyncMarkerFileName);
  if (entry.contains("sync_source") && entry["sync_source"].is_string()) {
    const std::string text = json{{"source", entry["sync_source"]}}.dump() + "\n";
    auto had = ReadWholeFile(env, sync_path, datastore::kMaxSyncMarkerBytes);
    if (!had.ok() || AsStringView(*had) != text) {
      CAIRN_RETURN_IF_ERROR(WriteFileReplacing(env, sync_path, AsBytes(text)));
    }
  } else if (env.Stat(sync_path).ok()) {
    CAIRN_RETURN_IF_ERROR(env.RemoveFile(sync_path));
  }
  return Status::Ok();
}

// Brings the mirror's snapshots (manifests, verify states) in line with the
// server's list: new and changed ones written, forgotten ones removed.
Status SyncSnapshotList(Env& env, RemoteClient& client_ref, const datastore::Datastore& store_ref) {
  RemoteClient* client = &client_ref;
  const datastore::Datastore* store = &store_ref;
  CAIRN_ASSIGN_OR_RETURN(Bytes body, client->Call("GET", client->StorePath("/snapshots")));
  json list = json::parse(AsStringView(body), nullptr, false);
  if (!list.is_object() || !list["snapshots"].is_array()) {
    return DataLossError(fmt::format("server {}: malformed snapshot list", client->url().ToString()));
  }
  std::set<std::string> on_server;
  for (const json& entry : list["snapshots"]) {
    if (!entry.is_object() || !entry["ns"].is_string() || !entry["type"].is_string() ||
        !entry["id"].is_string() || !entry["time"].is_string()) {
      return DataLossError(fmt::format("server {}: malformed snapshot list entry",
                                       client->url().ToString()));
    }
    std::string ns = entry["ns"];
    CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ns));
    CAIRN_ASSIGN_OR_RETURN(
        datastore::SnapshotSpec spec,
        datastore::ParseSnapshotSpec(ns, fmt::format("{}/{}/{}", entry["type"].get<std::string>(),
                                                     entry["id"].get<std::string>(),
                                                     entry["time"].get<std::string>())));
    if (spec.latest) return DataLossError("malformed snapshot time in the server's list");
    datastore::SnapshotRef snap{spec.group, spec.time};
    std::string dir = store->SnapshotDir(snap);
    on_server.insert(snap.RelDir());
    CAIRN_ASSIGN_OR_RETURN(Bytes manifest, Unhex(entry["manifest"], "manifest"));
    std::string manifest_path = JoinPath(dir, index::kManifestFileName);
    auto local = ReadWholeFile(env, manifest_path, kMaxMirrorFile);
    if (!local.ok() || *local != manifest) {
      // New, or changed (notes): what was fetched for the old one goes.
      if (local.ok()) CAIRN_RETURN_IF_ERROR(RemoveSnapshotDir(env, dir));
      CAIRN_RETURN_IF_ERROR(CreateDirs(env, dir));
      CAIRN_RETURN_IF_ERROR(WriteFileReplacing(env, manifest_path, manifest));
    }
    // The verify state is the server's record only: one the mirror holds
    // that the server does not (written by an older client's verify) goes.
    if (!entry.contains("verify")) {
      std::string state_path = JoinPath(dir, datastore::kVerifyStateFileName);
      if (env.Stat(state_path).ok()) CAIRN_RETURN_IF_ERROR(env.RemoveFile(state_path));
    }
    if (entry.contains("verify")) {
      CAIRN_ASSIGN_OR_RETURN(Bytes state, Unhex(entry["verify"], "verify state"));
      std::string state_path = JoinPath(dir, datastore::kVerifyStateFileName);
      auto old = ReadWholeFile(env, state_path, kMaxMirrorFile);
      if (!old.ok() || *old != state) CAIRN_RETURN_IF_ERROR(WriteFileReplacing(env, state_path, state));
    }
    CAIRN_RETURN_IF_ERROR(MirrorSideFiles(env, dir, entry));
  }
  // Snapshots forgotten on the server leave the mirror.
  CAIRN_ASSIGN_OR_RETURN(auto local_snaps, store->ListAllSnapshots());
  for (const datastore::SnapshotRef& snap : local_snaps) {
    if (!on_server.contains(snap.RelDir())) {
      CAIRN_RETURN_IF_ERROR(RemoveSnapshotDir(env, store->SnapshotDir(snap)));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<datastore::Datastore>> OpenMirror(Env& env,
                                                         std::shared_ptr<RemoteClient> client,
                                                         const std::string& mirror_dir) {
  CAIRN_RETURN_IF_ERROR(client->Check());
  CAIRN_RETURN_IF_ERROR(EnsureMirror(env, mirror_dir));
  CAIRN_ASSIGN_OR_RETURN(auto store, datastore::Datastore::Open(env, mirror_dir));
  CAIRN_RETURN_IF_ERROR(SyncSnapshotList(env, *client, *store));
  store->SetRemote(std::make_shared<RemoteStoreBackend>(client));
  store->SetRefresher([&env, client, s = store.get()] { return SyncSnapshotList(env, *client, *s); });
  return store;
}

}  // namespace cairn::remote
