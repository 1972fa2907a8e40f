#include "datastore/datastore.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <nlohmann/json.hpp>

#include "blob/blob.h"
#include "format/magic.h"

namespace cairn::datastore {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxManifestFile = blob::kHeaderSize + (1u << 20);
constexpr uint64_t kMaxBlobFile = blob::kHeaderSize + blob::kMaxRawSize;

bool IsDir(Env& env, const std::string& path) {
  auto info = env.Stat(path);
  return info.ok() && info->is_dir;
}

// Lists `dir`, treating a missing directory as empty.
Result<std::vector<std::string>> ListOrEmpty(Env& env, const std::string& dir) {
  auto names = env.ListDir(dir);
  if (!names.ok() && names.status().code() == StatusCode::kNotFound) {
    return std::vector<std::string>{};
  }
  return names;
}

}  // namespace

Status Datastore::Init(Env& env, const std::string& path) {
  auto info = env.Stat(path);
  if (info.ok()) {
    if (!info->is_dir) {
      return AlreadyExistsError(fmt::format("{} exists and is not a directory", path));
    }
    CAIRN_ASSIGN_OR_RETURN(auto names, env.ListDir(path));
    if (!names.empty()) {
      if (std::find(names.begin(), names.end(), kDatastoreMarker) != names.end()) {
        return AlreadyExistsError(fmt::format("{} is already a cairn datastore", path));
      }
      return AlreadyExistsError(
          fmt::format("{} exists and is not empty; give a new or empty directory", path));
    }
  } else if (info.status().code() == StatusCode::kNotFound) {
    CAIRN_RETURN_IF_ERROR(CreateDirs(env, path));
  } else {
    return info.status();
  }
  CAIRN_RETURN_IF_ERROR(store::LocalChunkStore::Create(env, path));
  json marker = {{"format", "cairn-datastore"},
                 {"version", format::kDatastoreVersion},
                 {"created_unix", env.NowUnixSeconds()}};
  std::string text = marker.dump(2) + "\n";
  return WriteFileAtomic(env, JoinPath(path, kDatastoreMarker), AsBytes(text));
}

Result<std::unique_ptr<Datastore>> Datastore::Open(Env& env, const std::string& path) {
  auto info = env.Stat(path);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound) {
      return NotFoundError(
          fmt::format("datastore {} does not exist (create it with: cairn init {})", path, path));
    }
    return info.status();
  }
  if (!info->is_dir) return NotFoundError(fmt::format("datastore {} is not a directory", path));
  std::string marker_path = JoinPath(path, kDatastoreMarker);
  auto marker = ReadWholeFile(env, marker_path, 64 << 10);
  if (!marker.ok()) {
    if (marker.status().code() == StatusCode::kNotFound) {
      return NotFoundError(
          fmt::format("{} is not a cairn datastore (no {} file; create one with: cairn init PATH)",
                      path, kDatastoreMarker));
    }
    return marker.status();
  }
  json j = json::parse(AsStringView(*marker), nullptr, false);
  // Compared as JSON values, so a field of another type is a mismatch, not
  // an exception.
  if (j.is_discarded() || !j.is_object() || !j.contains("format") ||
      j["format"] != "cairn-datastore" || !j.contains("version") ||
      !j["version"].is_number_integer()) {
    return DataLossError(fmt::format("{}: malformed datastore marker", marker_path));
  }
  if (j["version"] != format::kDatastoreVersion) {
    return FailedPreconditionError(
        fmt::format("{}: datastore format version {} is not supported by this cairn (supports {})",
                    path, j["version"].dump(), format::kDatastoreVersion));
  }
  CAIRN_ASSIGN_OR_RETURN(auto chunks, store::LocalChunkStore::Open(env, path));
  return std::unique_ptr<Datastore>(new Datastore(env, path, std::move(chunks)));
}

Result<std::vector<GroupRef>> Datastore::ListGroups(const std::string& ns) const {
  std::string base = ns.empty() ? path_ : JoinPath(path_, GroupRef{ns, "", ""}.RelDir());
  std::vector<GroupRef> groups;
  for (const char* type : {"ct", "host", "vm"}) {
    std::string type_dir = JoinPath(base, type);
    CAIRN_ASSIGN_OR_RETURN(auto ids, ListOrEmpty(env_, type_dir));
    std::sort(ids.begin(), ids.end());
    for (const auto& id : ids) {
      auto group = ParseGroup(ns, fmt::format("{}/{}", type, id));
      if (group.ok() && IsDir(env_, JoinPath(type_dir, id))) groups.push_back(*group);
    }
  }
  return groups;
}

Result<std::vector<std::string>> Datastore::ListNamespaces(const std::string& ns) const {
  std::string base = ns.empty() ? path_ : JoinPath(path_, GroupRef{ns, "", ""}.RelDir());
  CAIRN_ASSIGN_OR_RETURN(auto names, ListOrEmpty(env_, JoinPath(base, "ns")));
  std::sort(names.begin(), names.end());
  std::vector<std::string> out;
  for (const auto& name : names) {
    std::string full = ns.empty() ? name : ns + "/" + name;
    if (ValidateNamespace(full).ok()) out.push_back(full);
  }
  return out;
}

Result<std::vector<SnapshotRef>> Datastore::ListSnapshots(const GroupRef& group) const {
  std::string dir = GroupDir(group);
  CAIRN_ASSIGN_OR_RETURN(auto names, ListOrEmpty(env_, dir));
  std::vector<SnapshotRef> snaps;
  for (const auto& name : names) {
    auto time = ParseRfc3339(name);
    if (!time.ok()) continue;  // lock file, temporary names
    if (!env_.Stat(JoinPath(JoinPath(dir, name), index::kManifestFileName)).ok()) {
      continue;  // unfinished backup: does not exist for readers
    }
    snaps.push_back(SnapshotRef{group, *time});
  }
  std::sort(snaps.begin(), snaps.end(),
            [](const SnapshotRef& a, const SnapshotRef& b) { return a.time < b.time; });
  return snaps;
}

Status Datastore::ListAllIn(const std::string& ns, int depth, std::vector<SnapshotRef>* out) const {
  CAIRN_ASSIGN_OR_RETURN(auto groups, ListGroups(ns));
  for (const auto& g : groups) {
    CAIRN_ASSIGN_OR_RETURN(auto snaps, ListSnapshots(g));
    out->insert(out->end(), snaps.begin(), snaps.end());
  }
  if (depth >= 7) return Status::Ok();
  CAIRN_ASSIGN_OR_RETURN(auto children, ListNamespaces(ns));
  for (const auto& child : children) CAIRN_RETURN_IF_ERROR(ListAllIn(child, depth + 1, out));
  return Status::Ok();
}

Result<std::vector<SnapshotRef>> Datastore::ListAllSnapshots() const {
  std::vector<SnapshotRef> out;
  CAIRN_RETURN_IF_ERROR(ListAllIn("", 0, &out));
  return out;
}

Result<SnapshotRef> Datastore::Resolve(const SnapshotSpec& spec) const {
  CAIRN_ASSIGN_OR_RETURN(auto snaps, ListSnapshots(spec.group));
  if (spec.latest) {
    if (snaps.empty()) {
      return NotFoundError(fmt::format("group {} has no finished snapshot in datastore {}",
                                       spec.group.ToString(), path_));
    }
    return snaps.back();
  }
  SnapshotRef want{spec.group, spec.time};
  if (std::find(snaps.begin(), snaps.end(), want) == snaps.end()) {
    return NotFoundError(
        fmt::format("snapshot {} not found in datastore {}", want.ToString(), path_));
  }
  return want;
}

Result<index::Manifest> Datastore::ReadManifest(const SnapshotRef& snap) const {
  std::string path = JoinPath(SnapshotDir(snap), index::kManifestFileName);
  auto data = ReadWholeFile(env_, path, kMaxManifestFile);
  if (!data.ok()) return data.status();
  auto manifest = index::DecodeManifest(*data);
  if (!manifest.ok()) {
    return DataLossError(fmt::format("manifest {}: {}", path, manifest.status().message()));
  }
  if (manifest->type != snap.group.type || manifest->id != snap.group.id ||
      manifest->time != snap.TimeString()) {
    return DataLossError(fmt::format("manifest {} names snapshot {}/{}/{}, not {}", path,
                                     manifest->type, manifest->id, manifest->time,
                                     snap.ToString()));
  }
  if (manifest->encrypted && key_ != nullptr && manifest->key_fingerprint == key_->fingerprint()) {
    Status sig = index::CheckManifestSignature(*manifest, *key_);
    if (!sig.ok()) return sig.WithContext(path);
  }
  return manifest;
}

Result<const crypto::CryptConfig*> Datastore::CryptFor(const index::Manifest& m) const {
  if (!m.encrypted) return static_cast<const crypto::CryptConfig*>(nullptr);
  if (key_ == nullptr) {
    return UnauthenticatedError(fmt::format(
        "snapshot {}/{}/{} is encrypted (key fingerprint {}...): give its key with --keyfile "
        "or CAIRN_KEYFILE",
        m.type, m.id, m.time, crypto::DigestHex(m.key_fingerprint).substr(0, 16)));
  }
  CAIRN_RETURN_IF_ERROR(index::CheckManifestSignature(m, *key_));
  return key_.get();
}

Result<index::FixedIndex> Datastore::ReadImageIndex(const SnapshotRef& snap,
                                                    const index::ArchiveEntry& entry) const {
  std::string path = JoinPath(SnapshotDir(snap), entry.FileName());
  CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, index::ReadFixedIndex(env_, path));
  CAIRN_RETURN_IF_ERROR(CheckImageIndex(
      path, snap, entry, {idx.image_size(), idx.chunk_size(), idx.chunk_count(), idx.csum()}));
  return idx;
}

Status Datastore::ScanImageIndex(
    const SnapshotRef& snap, const index::ArchiveEntry& entry,
    const std::function<void(size_t, const crypto::Digest&)>& fn) const {
  std::string path = JoinPath(SnapshotDir(snap), entry.FileName());
  CAIRN_ASSIGN_OR_RETURN(index::FixedIndexInfo info, index::ScanFixedIndex(env_, path, fn));
  return CheckImageIndex(path, snap, entry, info);
}

Status Datastore::CheckImageIndex(const std::string& path, const SnapshotRef& snap,
                                  const index::ArchiveEntry& entry,
                                  const index::FixedIndexInfo& info) const {
  if (info.image_size != entry.size || info.chunk_size != entry.chunk_size ||
      info.csum != entry.csum) {
    return DataLossError(fmt::format(
        "{}: index does not match the manifest of {} (size {} vs {}, checksum {} vs {})", path,
        snap.ToString(), info.image_size, entry.size, crypto::DigestHex(info.csum),
        crypto::DigestHex(entry.csum)));
  }
  return Status::Ok();
}

Result<Datastore::TreeIndexes> Datastore::ReadTreeIndexes(const SnapshotRef& snap,
                                                          const index::ArchiveEntry& entry) const {
  auto read = [&](const std::string& file, uint64_t size,
                  const crypto::Digest& csum) -> Result<index::DynamicIndex> {
    std::string path = JoinPath(SnapshotDir(snap), file);
    CAIRN_ASSIGN_OR_RETURN(index::DynamicIndex idx, index::ReadDynamicIndex(env_, path));
    if (idx.size() != size || idx.csum() != csum) {
      return DataLossError(fmt::format(
          "{}: index does not match the manifest of {} (size {} vs {}, checksum {} vs {})", path,
          snap.ToString(), idx.size(), size, crypto::DigestHex(idx.csum()),
          crypto::DigestHex(csum)));
    }
    return idx;
  };
  TreeIndexes out;
  CAIRN_ASSIGN_OR_RETURN(out.meta, read(entry.MetaFileName(), entry.meta_size, entry.meta_csum));
  CAIRN_ASSIGN_OR_RETURN(out.data, read(entry.FileName(), entry.size, entry.csum));
  return out;
}

Result<Bytes> Datastore::ReadBlobArchive(const SnapshotRef& snap, const index::ArchiveEntry& entry,
                                         const crypto::CryptConfig* crypt) const {
  std::string path = JoinPath(SnapshotDir(snap), entry.FileName());
  auto stored = ReadWholeFile(env_, path, kMaxBlobFile);
  if (!stored.ok()) {
    if (stored.status().code() == StatusCode::kInvalidArgument) {
      return DataLossError(std::string(stored.status().message()));
    }
    return stored.status();
  }
  if (crypto::Sha256(*stored) != entry.csum) {
    return DataLossError(
        fmt::format("{}: blob checksum does not match the manifest of {}", path, snap.ToString()));
  }
  auto plain = blob::Decode(*stored, crypt);
  if (!plain.ok()) {
    if (plain.status().code() == StatusCode::kUnauthenticated) {  // no key, or another
      return plain.status().WithContext(path);
    }
    return DataLossError(fmt::format("{}: {}", path, plain.status().message()));
  }
  if (crypt != nullptr && blob::Check(*stored)->encryption == blob::Encryption::kNone) {
    return DataLossError(fmt::format("{}: not encrypted, but its snapshot is", path));
  }
  if (plain->size() != entry.size) {
    return DataLossError(
        fmt::format("{}: {} bytes, manifest says {}", path, plain->size(), entry.size));
  }
  return plain;
}

std::optional<VerifyState> Datastore::ReadVerifyState(const SnapshotRef& snap) const {
  auto stored = ReadWholeFile(env_, JoinPath(SnapshotDir(snap), kVerifyStateFileName), 1 << 20);
  if (!stored.ok()) return std::nullopt;
  auto plain = blob::Decode(*stored);
  if (!plain.ok()) return std::nullopt;
  json j = json::parse(AsStringView(*plain), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  // Types are checked before conversion: a float or a huge number where an
  // integer belongs reads as "not verified", never as undefined behaviour.
  auto integer = [&](const char* key) {
    return j.contains(key) && (j[key].is_number_integer() || j[key].is_number_unsigned());
  };
  if (!integer("version") || !integer("time") || !j.contains("state") || !j["state"].is_string() ||
      !j.contains("errors") || !j["errors"].is_number_unsigned()) {
    return std::nullopt;
  }
  if (j["version"] != format::kVerifyStateVersion) return std::nullopt;
  VerifyState state;
  const std::string& outcome = j["state"].get_ref<const std::string&>();
  if (outcome != "ok" && outcome != "failed") return std::nullopt;
  state.outcome = outcome == "ok" ? VerifyOutcome::kOk : VerifyOutcome::kFailed;
  if (j["time"].is_number_unsigned() && j["time"].get<uint64_t>() > INT64_MAX) return std::nullopt;
  state.time = j["time"].get<int64_t>();
  state.errors = j["errors"].get<uint64_t>();
  return state;
}

Status Datastore::WriteVerifyState(const SnapshotRef& snap, const VerifyState& state) const {
  json j = {{"version", format::kVerifyStateVersion},
            {"state", state.outcome == VerifyOutcome::kOk ? "ok" : "failed"},
            {"time", state.time},
            {"errors", state.errors}};
  CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(AsBytes(j.dump())));
  return WriteFileAtomic(env_, JoinPath(SnapshotDir(snap), kVerifyStateFileName), stored);
}

Result<std::unique_ptr<FileLock>> Datastore::LockGroup(const GroupRef& group) const {
  std::string dir = GroupDir(group);
  CAIRN_RETURN_IF_ERROR(CreateDirs(env_, dir));
  auto lock = env_.TryLock(JoinPath(dir, ".lock"), /*exclusive=*/true);
  if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
    return AbortedError(fmt::format(
        "another backup of {} is running in datastore {}; try again when it has finished",
        group.ToString(), path_));
  }
  return lock;
}

namespace {

constexpr char kBarrierFile[] = "barrier";

// Two locks held together.
class LockPair : public FileLock {
 public:
  LockPair(std::unique_ptr<FileLock> a, std::unique_ptr<FileLock> b)
      : a_(std::move(a)), b_(std::move(b)) {}

 private:
  std::unique_ptr<FileLock> a_, b_;
};

// Takes the gc barrier, retrying while it is held the other way, up to
// `wait_ns`.
Result<std::unique_ptr<FileLock>> LockBarrier(Env& env, const std::string& store_path,
                                              bool exclusive, int64_t wait_ns) {
  std::string dir = JoinPath(store_path, kGcDirName);
  CAIRN_RETURN_IF_ERROR(CreateDirs(env, dir));
  const int64_t deadline = env.NowMonotonicNanos() + wait_ns;
  while (true) {
    auto lock = env.TryLock(JoinPath(dir, kBarrierFile), exclusive);
    if (lock.ok() || lock.status().code() != StatusCode::kUnavailable ||
        env.NowMonotonicNanos() >= deadline) {
      return lock;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

Result<std::unique_ptr<FileLock>> Datastore::RegisterWriter() const {
  static std::atomic<uint64_t> counter{0};
  std::string dir = JoinPath(path_, kWritersDirName);
  CAIRN_RETURN_IF_ERROR(CreateDirs(env_, dir));
  std::string name = fmt::format("{}-{}-{}", env_.NowUnixNanos(), ::getpid(), counter.fetch_add(1));
  // Locked under a temporary name and then renamed (the lock stays with the
  // file), so gc never sees the registration of a live writer unlocked.
  std::string tmp = JoinPath(dir, ".tmp-" + name);
  auto lock = env_.TryLock(tmp, /*exclusive=*/true);
  if (!lock.ok()) return lock.status().WithContext("registering the backup for garbage collection");
  CAIRN_RETURN_IF_ERROR(env_.Rename(tmp, JoinPath(dir, name))
                            .WithContext("registering the backup for garbage collection"));
  if (!chunks_in_object_store()) return lock;
  auto barrier = LockBarrier(env_, path_, /*exclusive=*/false, int64_t{600} * 1000000000);
  if (!barrier.ok()) {
    if (barrier.status().code() == StatusCode::kUnavailable) {
      return AbortedError(fmt::format(
          "gc has been deleting chunks of datastore {} for 10 minutes; try again when it "
          "has finished",
          DisplayName()));
    }
    return barrier.status().WithContext("registering the backup for garbage collection");
  }
  return std::unique_ptr<FileLock>(new LockPair(std::move(*lock), std::move(*barrier)));
}

Result<std::unique_ptr<FileLock>> Datastore::LockChunkRemoval(int64_t wait_ns) const {
  auto lock = LockBarrier(env_, path_, /*exclusive=*/true, wait_ns);
  if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
    return AbortedError(fmt::format("a backup is running on datastore {}", DisplayName()));
  }
  return lock;
}

Result<std::string> Datastore::QuarantineChunk(const store::ChunkId& id) const {
  if (chunks_in_object_store()) return remote_->Quarantine(id);
  if (remote_) {
    return FailedPreconditionError(
        "chunks are quarantined by the server's own verify (cairn verify --on-server)");
  }
  return chunks_->Quarantine(id);
}

Result<std::unique_ptr<FileLock>> Datastore::LockSnapshotShared(const SnapshotRef& snap) const {
  std::string manifest = JoinPath(SnapshotDir(snap), index::kManifestFileName);
  auto lock = env_.TryLockExisting(manifest, /*exclusive=*/false);
  if (!lock.ok()) {
    if (lock.status().code() == StatusCode::kNotFound) {
      return NotFoundError(
          fmt::format("snapshot {} not found in datastore {}", snap.ToString(), path_));
    }
    if (lock.status().code() == StatusCode::kUnavailable) {
      return AbortedError(fmt::format("snapshot {} is being removed", snap.ToString()));
    }
    return lock.status();
  }
  // Forget unlinks the manifest while holding the exclusive lock; if that
  // happened between our open and our flock, the snapshot is gone.
  if (!env_.Stat(manifest).ok()) {
    return NotFoundError(
        fmt::format("snapshot {} not found in datastore {}", snap.ToString(), path_));
  }
  return lock;
}

Result<std::unique_ptr<FileLock>> Datastore::LockSnapshotExclusive(const SnapshotRef& snap) const {
  std::string manifest = JoinPath(SnapshotDir(snap), index::kManifestFileName);
  auto lock = env_.TryLockExisting(manifest, /*exclusive=*/true);
  if (!lock.ok() && lock.status().code() == StatusCode::kUnavailable) {
    return AbortedError(fmt::format(
        "snapshot {} is in use (a restore reads it, or a running backup uses it as its base); "
        "try again when that has finished",
        snap.ToString()));
  }
  if (!lock.ok() && lock.status().code() == StatusCode::kNotFound) {
    return NotFoundError(
        fmt::format("snapshot {} not found in datastore {}", snap.ToString(), path_));
  }
  return lock;
}

Status RemoteBackend::ListChunks(const ChunkVisitor&) {
  return FailedPreconditionError(fmt::format("{} does not list its chunks", Describe()));
}

Status RemoteBackend::RemoveChunks(std::span<const std::string>) {
  return FailedPreconditionError(fmt::format("{} does not remove chunks", Describe()));
}

Result<std::string> RemoteBackend::Quarantine(const crypto::Digest&) {
  return FailedPreconditionError(fmt::format("{} does not quarantine chunks", Describe()));
}

}  // namespace cairn::datastore
