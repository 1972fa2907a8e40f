#include "maintenance/store_status.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>

#include "pipeline/worker_group.h"
#include "store/local_chunk_store.h"

namespace cairn::maintenance {

Result<StoreStatus> ReadStoreStatus(const datastore::Datastore& store, int threads) {
  Env& env = store.env();
  StoreStatus st;
  CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListAllSnapshots());
  st.snapshots = snaps.size();
  std::set<std::string> groups, namespaces;
  for (const auto& s : snaps) {
    groups.insert(s.group.RelDir());
    if (!s.group.ns.empty()) namespaces.insert(s.group.ns);
    auto manifest = store.ReadManifest(s);
    if (manifest.ok()) {
      for (const auto& a : manifest->archives) st.logical_bytes += a.size;
    }
    auto verify = store.ReadVerifyState(s);
    if (!verify) {
      ++st.never_verified;
    } else {
      if (verify->outcome == datastore::VerifyOutcome::kFailed) ++st.failed_verify;
      st.last_verify_unix = std::max(st.last_verify_unix, verify->time);
    }
  }
  st.groups = groups.size();
  st.namespaces = namespaces.size();
  st.last_gc = ReadLastGc(store);

  if (store.chunks_in_object_store()) {
    // One listing of the chunk objects (the object store says their sizes).
    std::atomic<uint64_t> chunks{0}, bytes{0}, bad{0};
    CAIRN_RETURN_IF_ERROR(store.remote()->ListChunks([&](std::string_view name, uint64_t size) {
      if (name.ends_with(".bad")) {
        bad.fetch_add(1);
        return;
      }
      chunks.fetch_add(1);
      bytes.fetch_add(size);
    }));
    st.chunks = chunks;
    st.chunk_bytes = bytes;
    st.bad_chunks = bad;
    return st;  // no file system of ours to measure
  }

  // The chunk files, on several threads (a stat each).
  if (threads <= 0) threads = static_cast<int>(std::max(4u, std::thread::hardware_concurrency()));
  std::atomic<uint64_t> chunks{0}, bytes{0}, trash{0}, trash_bytes{0}, bad{0};
  CAIRN_RETURN_IF_ERROR(pipeline::ParallelFor(threads, store::kChunkPrefixDirs, [&](size_t p) {
    std::string dir = store.chunks().PrefixDirPath(static_cast<unsigned>(p));
    auto names = env.ListDir(dir);
    if (!names.ok()) return Status::Ok();
    for (const auto& name : *names) {
      if (name.size() < 64) continue;
      std::string_view suffix = std::string_view(name).substr(64);
      if (suffix == ".bad") {
        bad.fetch_add(1);
        continue;
      }
      bool is_trash = suffix == store::kTrashSuffix;
      if (!is_trash && !suffix.empty()) continue;  // temporary files
      auto info = env.Stat(JoinPath(dir, name));
      if (!info.ok()) continue;
      (is_trash ? trash : chunks).fetch_add(1);
      (is_trash ? trash_bytes : bytes).fetch_add(info->size);
    }
    return Status::Ok();
  }));
  st.chunks = chunks;
  st.chunk_bytes = bytes;
  st.trash_chunks = trash;
  st.trash_bytes = trash_bytes;
  st.bad_chunks = bad;

  struct statvfs vfs;
  if (::statvfs(store.path().c_str(), &vfs) == 0) {
    st.fs_total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    st.fs_free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  return st;
}

namespace {

nlohmann::json When(int64_t unix_seconds) {
  return unix_seconds == 0 ? nlohmann::json(nullptr)
                           : nlohmann::json(datastore::FormatRfc3339(unix_seconds));
}

}  // namespace

nlohmann::json StoreStatusJson(const StoreStatus& s, const std::string& datastore) {
  nlohmann::json gc = nullptr;
  if (s.last_gc) {
    gc = {{"time", When(s.last_gc->end_unix_ns / 1000000000)},
          {"removed_chunks", s.last_gc->removed_chunks},
          {"removed_bytes", s.last_gc->removed_bytes},
          {"pending_chunks", s.last_gc->pending_chunks},
          {"pending_bytes", s.last_gc->pending_bytes}};
  }
  return {{"datastore", datastore},
          {"namespaces", s.namespaces},
          {"groups", s.groups},
          {"snapshots", s.snapshots},
          {"logical_bytes", s.logical_bytes},
          {"chunks", s.chunks},
          {"chunk_bytes", s.chunk_bytes},
          {"dedup_factor", s.DedupFactor()},
          {"trash_chunks", s.trash_chunks},
          {"trash_bytes", s.trash_bytes},
          {"bad_chunks", s.bad_chunks},
          {"never_verified", s.never_verified},
          {"failed_verify", s.failed_verify},
          {"last_verify", When(s.last_verify_unix)},
          {"last_gc", gc},
          {"fs_total_bytes", s.fs_total_bytes},
          {"fs_free_bytes", s.fs_free_bytes}};
}

}  // namespace cairn::maintenance
