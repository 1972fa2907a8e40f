#include "server/backup_session.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "blob/blob.h"
#include "crypto/crypt_config.h"
#include "format/coding.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"

namespace cairn::server {

class BackupSession {
 public:
  std::string id;
  std::string token;
  std::string store_name;
  const datastore::Datastore* store = nullptr;
  datastore::SnapshotRef snap;
  std::chrono::steady_clock::time_point last_used;  // guarded by the registry's mutex

  std::mutex mu;  // guards the members below
  std::unique_ptr<datastore::LocalSnapshotTarget> target;
  std::unique_ptr<FileLock> base_lock;
  bool has_base = false;
  DigestSet allowed;  // the base's chunks and the uploaded ones
  struct FileSum {
    crypto::Digest csum{};
    uint64_t size = 0;
  };
  std::map<std::string, FileSum> files;
};

namespace {

// The largest stored chunk accepted: a blob of kMaxRawSize that did not
// compress, plus its header and the AEAD overhead.
constexpr uint32_t kMaxStoredChunk = blob::kMaxRawSize + 4096;

bool IsArchiveFileName(std::string_view name) {
  return IsSnapshotFileName(name) && name != index::kManifestFileName &&
         name != datastore::kVerifyStateFileName;
}

std::string NewSessionId() {
  std::array<uint8_t, 16> raw{};
  crypto::RandomBytes(raw);
  return ToHex(raw);
}

// Every digest of `digests` the session may reference, or InvalidArgument
// naming the first that it may not.
template <typename Index>
Status CheckReferences(const BackupSession& s, const std::string& file, const Index& idx) {
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    if (!s.allowed.contains(idx.digest(i))) {
      return PermissionDeniedError(fmt::format(
          "{}: chunk {} (entry {}) was neither uploaded in this session nor is in its base "
          "snapshot",
          file, crypto::DigestHex(idx.digest(i)), i));
    }
  }
  return Status::Ok();
}

}  // namespace

bool IsSnapshotFileName(std::string_view name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return name.ends_with(".blob") || name.ends_with(".img.fidx") ||
         name.ends_with(".tree.meta.didx") || name.ends_with(".tree.data.didx");
}

std::string ReadGroupOwner(Env& env, const std::string& group_dir) {
  auto owner = ReadWholeFile(env, JoinPath(group_dir, kOwnerFileName), 4096);
  if (!owner.ok()) return "";
  std::string_view text = AsStringView(*owner);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return std::string(text);
}

SessionRegistry::SessionRegistry(Logger& logger, std::chrono::seconds timeout)
    : logger_(logger), timeout_(timeout) {
  reaper_ = std::thread([this] { Reap(); });
}

SessionRegistry::~SessionRegistry() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  reaper_.join();
  std::map<std::string, std::shared_ptr<BackupSession>> open;
  {
    std::lock_guard lock(mu_);
    open.swap(sessions_);
  }
  for (const auto& [id, s] : open) {
    logger_.Warn("backup session {} of {} ({}): aborted, the server stops", id, s->token,
                 s->snap.ToString());
  }
}

void SessionRegistry::Reap() {
  std::unique_lock lock(mu_);
  auto period = std::min<std::chrono::steady_clock::duration>(std::chrono::seconds(1), timeout_);
  while (!stopping_) {
    cv_.wait_for(lock, period);
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<BackupSession>> idle;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      // use_count 1: no request of the session is running.
      if (it->second.use_count() == 1 && now - it->second->last_used > timeout_) {
        idle.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    if (idle.empty()) continue;
    lock.unlock();
    for (const auto& s : idle) {
      logger_.Warn("backup session {} of {} ({}): no request for {} s, aborted", s->id, s->token,
                   s->snap.ToString(), timeout_.count());
    }
    idle.clear();  // removes the unfinished snapshots, unlocks the groups
    lock.lock();
  }
}

Result<std::string> SessionRegistry::Begin(const std::string& token, const std::string& store_name,
                                           const datastore::Datastore& store,
                                           const datastore::SnapshotRef& snap, bool check_owner) {
  CAIRN_ASSIGN_OR_RETURN(auto target, datastore::LocalSnapshotTarget::Begin(store, snap));
  // Under the group lock: nobody else creates the group or its owner now.
  Env& env = store.env();
  std::string group_dir = store.GroupDir(snap.group);
  std::string owner = ReadGroupOwner(env, group_dir);
  if (!owner.empty() && check_owner && owner != token) {
    return PermissionDeniedError(fmt::format("token '{}' does not own group {}", token,
                                             snap.group.ToString()));
  }
  if (owner.empty()) {
    if (check_owner) {
      CAIRN_ASSIGN_OR_RETURN(auto existing, store.ListSnapshots(snap.group));
      if (!existing.empty()) {
        return PermissionDeniedError(fmt::format(
            "group {} has snapshots but no owner; only an admin token may add to it", 
            snap.group.ToString()));
      }
    }
    CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(group_dir, kOwnerFileName),
                                          AsBytes(token + "\n")));
  }
  auto session = std::make_shared<BackupSession>();
  session->id = NewSessionId();
  session->token = token;
  session->store_name = store_name;
  session->store = &store;
  session->snap = snap;
  session->target = std::move(target);
  session->last_used = std::chrono::steady_clock::now();
  std::string id = session->id;
  {
    std::lock_guard lock(mu_);
    sessions_.emplace(id, std::move(session));
  }
  logger_.Info("backup session {} of {}: {} in datastore '{}'", id, token, snap.ToString(),
               store_name);
  return id;
}

Result<std::shared_ptr<BackupSession>> SessionRegistry::Find(const std::string& id,
                                                             const std::string& token,
                                                             const std::string& store_name) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->token != token ||
      it->second->store_name != store_name) {
    return NotFoundError(fmt::format(
        "no backup session '{}' (it ended, was aborted, or was idle for more than {} s)", id,
        timeout_.count()));
  }
  it->second->last_used = std::chrono::steady_clock::now();
  return it->second;
}

Status SessionRegistry::UseBase(BackupSession& s, const std::string& time) {
  CAIRN_ASSIGN_OR_RETURN(
      datastore::SnapshotSpec spec,
      datastore::ParseSnapshotSpec(s.snap.group.ns, fmt::format("{}/{}/{}", s.snap.group.type,
                                                                s.snap.group.id, time)));
  if (spec.latest) return InvalidArgumentError("the base must be a snapshot time, not 'latest'");
  datastore::SnapshotRef base{s.snap.group, spec.time};
  const datastore::Datastore& store = *s.store;
  std::lock_guard lock(s.mu);
  if (s.has_base) return FailedPreconditionError("the session's base is already set");
  CAIRN_ASSIGN_OR_RETURN(s.base_lock, store.LockSnapshotShared(base));
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(base));
  for (const index::ArchiveEntry& entry : manifest.archives) {
    if (entry.kind == index::ArchiveKind::kImage) {
      CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, store.ReadImageIndex(base, entry));
      s.allowed.insert(idx.digests().begin(), idx.digests().end());
    } else if (entry.kind == index::ArchiveKind::kTree) {
      CAIRN_ASSIGN_OR_RETURN(auto indexes, store.ReadTreeIndexes(base, entry));
      for (size_t i = 0; i < indexes.meta.chunk_count(); ++i) s.allowed.insert(indexes.meta.digest(i));
      for (size_t i = 0; i < indexes.data.chunk_count(); ++i) s.allowed.insert(indexes.data.digest(i));
    }
  }
  s.has_base = true;
  return Status::Ok();
}

Result<UploadResult> SessionRegistry::UploadChunks(BackupSession& s, ByteSpan frames) {
  UploadResult result;
  std::vector<crypto::Digest> stored;
  while (!frames.empty()) {
    if (frames.size() < kUploadFrameHeaderSize) {
      return InvalidArgumentError(fmt::format(
          "chunk upload: {} bytes left after {} chunks, less than a frame header", frames.size(),
          result.chunks));
    }
    crypto::Digest id;
    std::memcpy(id.data(), frames.data(), 32);
    uint32_t length = format::GetU32(&frames[32]);
    if (length > kMaxStoredChunk || length > frames.size() - kUploadFrameHeaderSize) {
      return InvalidArgumentError(fmt::format(
          "chunk upload: chunk {} claims {} bytes, {} are left (at most {} per chunk)",
          crypto::DigestHex(id), length, frames.size() - kUploadFrameHeaderSize,
          kMaxStoredChunk));
    }
    ByteSpan blob = frames.subspan(kUploadFrameHeaderSize, length);
    frames = frames.subspan(kUploadFrameHeaderSize + length);
    // The server re-hashes what it can: a plain chunk must decode to its
    // digest; an encrypted one (no key here) must pass its CRC.
    auto header = blob::Check(blob);
    Status valid = header.status();
    if (valid.ok() && header->encryption == blob::Encryption::kNone) {
      valid = blob::DecodeChunk(blob, id).status();
    }
    if (!valid.ok()) {
      return InvalidArgumentError(fmt::format("chunk {} refused: {}", crypto::DigestHex(id),
                                              valid.message()));
    }
    CAIRN_ASSIGN_OR_RETURN(store::InsertResult r, s.store->sink().Insert(id, blob));
    ++result.chunks;
    if (r.inserted) {
      ++result.inserted;
      result.stored_bytes += r.stored_bytes;
    }
    stored.push_back(id);
  }
  std::lock_guard lock(s.mu);
  s.allowed.insert(stored.begin(), stored.end());
  return result;
}

Status SessionRegistry::PutFile(BackupSession& s, const std::string& name, ByteSpan data) {
  if (!IsArchiveFileName(name)) {
    return InvalidArgumentError(fmt::format("'{}' is not the name of an archive file", name));
  }
  BackupSession::FileSum sum;
  std::lock_guard lock(s.mu);
  if (s.files.contains(name)) {
    return AlreadyExistsError(fmt::format("{} was already uploaded in this session", name));
  }
  if (name.ends_with(".img.fidx")) {
    auto idx = index::FixedIndex::Decode(data);
    if (!idx.ok()) return InvalidArgumentError(fmt::format("{}: {}", name, idx.status().message()));
    CAIRN_RETURN_IF_ERROR(CheckReferences(s, name, *idx));
    sum = {idx->csum(), idx->image_size()};
  } else if (name.ends_with(".didx")) {
    auto idx = index::DynamicIndex::Decode(data);
    if (!idx.ok()) return InvalidArgumentError(fmt::format("{}: {}", name, idx.status().message()));
    CAIRN_RETURN_IF_ERROR(CheckReferences(s, name, *idx));
    sum = {idx->csum(), idx->size()};
  } else {
    auto header = blob::Check(data);
    if (!header.ok()) {
      return InvalidArgumentError(fmt::format("{}: {}", name, header.status().message()));
    }
    sum = {crypto::Sha256(data), header->raw_size};
  }
  CAIRN_RETURN_IF_ERROR(s.target->WriteFile(name, data));
  s.files.emplace(name, sum);
  return Status::Ok();
}

Result<datastore::SnapshotRef> SessionRegistry::Finish(const std::string& id, ByteSpan stored) {
  std::shared_ptr<BackupSession> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return NotFoundError(fmt::format("no backup session '{}'", id));
    s = std::move(it->second);
    sessions_.erase(it);
  }
  std::lock_guard lock(s->mu);
  auto manifest = index::DecodeManifest(stored);
  if (!manifest.ok()) {
    return InvalidArgumentError(fmt::format("manifest: {}", manifest.status().message()));
  }
  if (manifest->ns != s->snap.group.ns || manifest->type != s->snap.group.type ||
      manifest->id != s->snap.group.id || manifest->time != s->snap.TimeString()) {
    return InvalidArgumentError(fmt::format("the manifest names another snapshot than {}",
                                            s->snap.ToString()));
  }
  size_t expected = 0;
  auto check = [&](const std::string& file, const crypto::Digest& csum, uint64_t size,
                   bool check_size) -> Status {
    auto it = s->files.find(file);
    if (it == s->files.end()) {
      return InvalidArgumentError(fmt::format("the manifest lists {}, which was not uploaded", file));
    }
    if (it->second.csum != csum || (check_size && it->second.size != size)) {
      return InvalidArgumentError(
          fmt::format("the manifest's checksum or size of {} does not match the uploaded file", file));
    }
    ++expected;
    return Status::Ok();
  };
  for (const index::ArchiveEntry& e : manifest->archives) {
    switch (e.kind) {
      case index::ArchiveKind::kImage:
        CAIRN_RETURN_IF_ERROR(check(e.FileName(), e.csum, e.size, true));
        break;
      case index::ArchiveKind::kTree:
        CAIRN_RETURN_IF_ERROR(check(e.FileName(), e.csum, e.size, true));
        CAIRN_RETURN_IF_ERROR(check(e.MetaFileName(), e.meta_csum, e.meta_size, true));
        break;
      case index::ArchiveKind::kBlob:
        // An encrypted blob's plaintext size is not known here.
        CAIRN_RETURN_IF_ERROR(check(e.FileName(), e.csum, e.size, !manifest->encrypted));
        break;
    }
  }
  if (expected != s->files.size()) {
    return InvalidArgumentError(fmt::format(
        "{} files were uploaded but the manifest lists {}", s->files.size(), expected));
  }
  CAIRN_RETURN_IF_ERROR(s->target->Commit(stored));
  logger_.Info("backup session {} of {}: {} finished ({} archives)", id, s->token,
               s->snap.ToString(), manifest->archives.size());
  return s->snap;
}

void SessionRegistry::Abort(const std::string& id) {
  std::shared_ptr<BackupSession> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  logger_.Info("backup session {} of {}: {} aborted by the client", id, s->token,
               s->snap.ToString());
}

bool SessionRegistry::MayRead(const std::string& token, const std::string& store_name,
                              const crypto::Digest& id) {
  std::lock_guard lock(mu_);
  for (const auto& [sid, s] : sessions_) {
    if (s->token != token || s->store_name != store_name) continue;
    std::lock_guard slock(s->mu);
    if (s->allowed.contains(id)) return true;
  }
  return false;
}

bool SessionRegistry::HasSession(const std::string& token, const std::string& store_name) {
  std::lock_guard lock(mu_);
  for (const auto& [sid, s] : sessions_) {
    if (s->token == token && s->store_name == store_name) return true;
  }
  return false;
}

size_t SessionRegistry::open_sessions() {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace cairn::server
