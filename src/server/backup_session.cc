#include "server/backup_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "blob/blob.h"
#include "crypto/crypt_config.h"
#include "datastore/sync_marker.h"
#include "format/coding.h"
#include "index/dynamic_index.h"
#include "index/fixed_index.h"
#include "index/manifest.h"
#include "server/backup_session_state.h"

namespace cairn::server {

namespace {

bool IsArchiveFileName(std::string_view name) {
  return IsSnapshotFileName(name) && name != index::kManifestFileName &&
         name != datastore::kVerifyStateFileName;
}

constexpr char kRepairTakesChunksOnly[] =
    "a repair session takes chunks only (no base, file or finish); DELETE ends it";

std::string NewSessionId() {
  std::array<uint8_t, 16> raw{};
  crypto::RandomBytes(raw);
  return ToHex(raw);
}

// Checks that the session may reference every digest of `idx` and notes
// what the file relies on (base, proved plain uploads, encrypted uploads);
// PermissionDenied naming the first digest it may not.
template <typename Index>
Status CheckReferences(const BackupSession& s, const std::string& file, const Index& idx,
                       BackupSession::FileSum* sum) {
  for (size_t i = 0; i < idx.chunk_count(); ++i) {
    const crypto::Digest& d = idx.digest(i);
    if (s.base.contains(d)) {
      sum->uses_base = true;
    } else if (s.proven.contains(d)) {
      sum->uses_proven = true;
    } else if (s.unproven.contains(d)) {
      sum->uses_unproven = true;
    } else {
      return PermissionDeniedError(fmt::format(
          "{}: chunk {} (entry {}) was neither uploaded in this session nor is in its base "
          "snapshot",
          file, crypto::DigestHex(d), i));
    }
  }
  return Status::Ok();
}

ChunkMode ModeOfManifest(const index::Manifest& m) {
  ChunkMode mode;
  mode.encrypted = m.encrypted;
  if (m.encrypted) std::memcpy(mode.key_print.data(), m.key_fingerprint.data(), mode.key_print.size());
  return mode;
}

std::string DescribeMode(const ChunkMode& mode) {
  if (!mode.encrypted) return "plain";
  return fmt::format("encrypted with key print {}", ToHex(mode.key_print));
}

// Groups owned by `token` in `ns` and the namespaces below it.
Result<int> CountOwnedGroups(const datastore::Datastore& store, const std::string& ns,
                             const std::string& token, int depth = 0) {
  int n = 0;
  CAIRN_ASSIGN_OR_RETURN(auto groups, store.ListGroups(ns));
  for (const datastore::GroupRef& g : groups) {
    if (ReadGroupOwner(store.env(), store.GroupDir(g)) == token) ++n;
  }
  if (depth >= 8) return n;
  CAIRN_ASSIGN_OR_RETURN(auto children, store.ListNamespaces(ns));
  for (const std::string& child : children) {
    CAIRN_ASSIGN_OR_RETURN(int below, CountOwnedGroups(store, child, token, depth + 1));
    n += below;
  }
  return n;
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

SessionRegistry::SessionRegistry(Logger& logger, SessionLimits limits)
    : logger_(logger), limits_(limits) {
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
  auto period =
      std::min<std::chrono::steady_clock::duration>(std::chrono::seconds(1), limits_.timeout);
  while (!stopping_) {
    cv_.wait_for(lock, period);
    auto now = std::chrono::steady_clock::now();
    std::vector<std::shared_ptr<BackupSession>> idle;
    std::vector<std::shared_ptr<BackupSession>> orphans;
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      // use_count 1: no request of the session is running.
      const bool quiet = it->second.use_count() == 1;
      const auto& orphaned = it->second->orphaned_since;
      if (quiet && now - it->second->last_used > limits_.timeout) {
        idle.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else if (quiet && orphaned && now - *orphaned >= limits_.orphan_grace &&
                 now - it->second->last_used >= limits_.orphan_grace) {
        orphans.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    if (idle.empty() && orphans.empty()) continue;
    lock.unlock();
    for (const auto& s : idle) {
      logger_.Warn("backup session {} of {} ({}): no request for {} s, aborted", s->id, s->token,
                   s->snap.ToString(), limits_.timeout.count());
    }
    for (const auto& s : orphans) {
      logger_.Warn("backup session {} of {} ({}): the client closed its connections and sent "
                   "nothing for {} ms, aborted",
                   s->id, s->token, s->snap.ToString(), limits_.orphan_grace.count());
    }
    orphans.clear();
    idle.clear();  // removes the unfinished snapshots, unlocks the groups
    lock.lock();
  }
}

Status SessionRegistry::CheckQuota(const std::string& token, const std::string& store_name,
                                   const datastore::Datastore& store, bool new_group) {
  if (new_group) {
    CAIRN_ASSIGN_OR_RETURN(int owned, CountOwnedGroups(store, "", token));
    int pending = 0;  // groups its open sessions will claim
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, s] : sessions_) {
        if (s->token == token && s->store_name == store_name && s->claims_group) ++pending;
      }
    }
    if (owned + pending >= limits_.max_groups_per_token) {
      return ResourceExhaustedError(fmt::format(
          "token '{}' owns {} groups in datastore '{}' (and claims {} in open sessions): at most "
          "{} per token (limits.max_groups_per_token)",
          token, owned, store_name, pending, limits_.max_groups_per_token));
    }
  }
  return Status::Ok();
}

Result<std::string> SessionRegistry::Begin(const std::string& token, const std::string& store_name,
                                           const datastore::Datastore& store,
                                           const datastore::SnapshotRef& snap, bool check_owner,
                                           uint64_t connection, bool repair) {
  auto session = std::make_shared<BackupSession>();
  session->id = NewSessionId();
  session->token = token;
  session->store_name = store_name;
  session->store = &store;
  session->snap = snap;
  session->last_used = std::chrono::steady_clock::now();
  {
    // The slot is taken now (a placeholder without a target), so that
    // concurrent Begins of one token cannot all pass the count.
    std::lock_guard lock(mu_);
    int open = 0;
    for (const auto& [id, s] : sessions_) open += s->token == token ? 1 : 0;
    if (open >= limits_.max_sessions_per_token) {
      return ResourceExhaustedError(fmt::format(
          "token '{}' has {} backup sessions open: at most {} per token "
          "(limits.max_sessions_per_token); finish or abort one first",
          token, open, limits_.max_sessions_per_token));
    }
    Attach(*session, connection);
    sessions_.emplace(session->id, session);
  }
  // A repair session writes no snapshot: it waits for no other session.
  const std::string holder =
      repair ? std::string() : ReleaseOrphanOf(store_name, snap, session->id, token);
  auto claims = [&]() -> Result<bool> {
    if (!repair) return OpenTarget(*session, store, check_owner);
    CAIRN_RETURN_IF_ERROR(OpenRepair(*session, store, check_owner));
    return false;  // claims no group
  }();
  {
    std::lock_guard lock(mu_);
    if (!claims.ok()) {
      sessions_.erase(session->id);
      if (claims.status().code() == StatusCode::kAborted && !holder.empty()) {
        return claims.status().WithContext(holder);
      }
      return claims.status();
    }
    session->claims_group = *claims;
    session->started = true;
  }
  logger_.Info("{} session {} of {}: {} in datastore '{}'", repair ? "repair" : "backup",
               session->id, token, snap.ToString(), store_name);
  return session->id;
}

void SessionRegistry::Attach(BackupSession& s, uint64_t connection) {
  if (connection == 0) return;
  s.connections.insert(connection);
  s.orphaned_since.reset();
}

void SessionRegistry::ConnectionClosed(uint64_t connection, bool by_client) {
  {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto& [id, s] : sessions_) {
      if (s->connections.erase(connection) == 0 || !s->connections.empty()) continue;
      if (by_client) s->orphaned_since = now;
    }
  }
  cv_.notify_all();
}

std::string SessionRegistry::ReleaseOrphanOf(const std::string& store_name,
                                             const datastore::SnapshotRef& snap,
                                             const std::string& new_id, const std::string& token) {
  std::shared_ptr<BackupSession> orphan;
  std::string holder;
  {
    std::unique_lock lock(mu_);
    const auto deadline = std::chrono::steady_clock::now() + limits_.takeover_wait;
    bool waited = false;
    for (;;) {
      auto it = std::find_if(sessions_.begin(), sessions_.end(), [&](const auto& e) {
        const BackupSession& s = *e.second;
        return e.first != new_id && s.started && s.store_name == store_name &&
               s.snap.group == snap.group;
      });
      if (it == sessions_.end()) return "";
      const BackupSession& s = *it->second;
      const auto now = std::chrono::steady_clock::now();
      if (s.orphaned_since && it->second.use_count() == 1) {
        orphan = std::move(it->second);
        sessions_.erase(it);
        break;
      }
      if (waited) {
        holder = fmt::format(
            "backup session {} of token '{}' ({}) holds the group, its last request {} s ago{}",
            s.id, s.token, s.snap.ToString(),
            std::chrono::duration_cast<std::chrono::seconds>(now - s.last_used).count(),
            s.orphaned_since ? " (its client disconnected; it is aborted when its request ends)"
                             : fmt::format("; a session of a killed client is aborted when its "
                                           "connections close, or after {} s without a request",
                                           limits_.timeout.count()));
        break;
      }
      waited = cv_.wait_until(lock, deadline) == std::cv_status::timeout;
    }
  }
  if (orphan) {
    logger_.Warn("backup session {} of {} ({}): its client disconnected; aborted for a new backup "
                 "of the group by {}",
                 orphan->id, orphan->token, orphan->snap.ToString(), token);
  }
  return holder;  // the orphan, if any, is aborted here: its directory goes, the lock is free
}

Result<bool> SessionRegistry::OpenTarget(BackupSession& s, const datastore::Datastore& store,
                                         bool check_owner) {
  CAIRN_ASSIGN_OR_RETURN(auto target, datastore::LocalSnapshotTarget::Begin(store, s.snap));
  // Under the group lock: nobody else creates the group or its owner now.
  std::string owner = ReadGroupOwner(store.env(), store.GroupDir(s.snap.group));
  if (!owner.empty() && check_owner && owner != s.token) {
    return PermissionDeniedError(fmt::format("token '{}' does not own group {}", s.token,
                                             s.snap.group.ToString()));
  }
  if (owner.empty() && check_owner) {
    CAIRN_ASSIGN_OR_RETURN(auto existing, store.ListSnapshots(s.snap.group));
    if (!existing.empty()) {
      return PermissionDeniedError(fmt::format(
          "group {} has snapshots but no owner; only an admin token may add to it",
          s.snap.group.ToString()));
    }
    CAIRN_RETURN_IF_ERROR(CheckQuota(s.token, s.store_name, store, /*new_group=*/true));
  }
  std::lock_guard lock(s.mu);
  s.target = std::move(target);
  // The owner file is written at finish: an aborted session claims nothing.
  return owner.empty();
}

Status SessionRegistry::OpenRepair(BackupSession& s, const datastore::Datastore& store,
                                  bool check_owner) {
  // Shared, as a restore holds it: a forget waits until the repair ends.
  CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockSnapshotShared(s.snap));
  if (!store.env().Stat(JoinPath(store.SnapshotDir(s.snap), index::kManifestFileName)).ok()) {
    return NotFoundError(fmt::format("snapshot {} not found in the datastore: a repair session "
                                     "uploads chunks of an existing snapshot",
                                     s.snap.ToString()));
  }
  if (check_owner) {
    std::string owner = ReadGroupOwner(store.env(), store.GroupDir(s.snap.group));
    if (owner != s.token) {
      return PermissionDeniedError(fmt::format(
          "token '{}' does not own group {}: only its owner or an admin token may repair it",
          s.token, s.snap.group.ToString()));
    }
  }
  CAIRN_ASSIGN_OR_RETURN(auto writer, store.RegisterWriter());
  std::lock_guard guard(s.mu);
  s.repair = true;
  s.repair_lock = std::move(lock);
  s.writer = std::move(writer);
  return Status::Ok();
}

Result<std::shared_ptr<BackupSession>> SessionRegistry::Find(const std::string& id,
                                                             const std::string& token,
                                                             const std::string& store_name,
                                                             uint64_t connection) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->token != token ||
      it->second->store_name != store_name || !it->second->started) {
    return NotFoundError(fmt::format(
        "no backup session '{}' (it ended, was aborted, or was idle for more than {} s)", id,
        limits_.timeout.count()));
  }
  it->second->last_used = std::chrono::steady_clock::now();
  Attach(*it->second, connection);
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
  if (s.repair) return FailedPreconditionError(kRepairTakesChunksOnly);
  if (s.has_base) return FailedPreconditionError("the session's base is already set");
  CAIRN_ASSIGN_OR_RETURN(s.base_lock, store.LockSnapshotShared(base));
  CAIRN_ASSIGN_OR_RETURN(index::Manifest manifest, store.ReadManifest(base));
  for (const index::ArchiveEntry& entry : manifest.archives) {
    if (entry.kind == index::ArchiveKind::kImage) {
      CAIRN_ASSIGN_OR_RETURN(index::FixedIndex idx, store.ReadImageIndex(base, entry));
      s.base.insert(idx.digests().begin(), idx.digests().end());
    } else if (entry.kind == index::ArchiveKind::kTree) {
      CAIRN_ASSIGN_OR_RETURN(auto indexes, store.ReadTreeIndexes(base, entry));
      for (size_t i = 0; i < indexes.meta.chunk_count(); ++i) s.base.insert(indexes.meta.digest(i));
      for (size_t i = 0; i < indexes.data.chunk_count(); ++i) s.base.insert(indexes.data.digest(i));
    }
  }
  s.base_mode = ModeOfManifest(manifest);
  s.has_base = true;
  return Status::Ok();
}

Status SessionRegistry::PutFile(BackupSession& s, const std::string& name, ByteSpan data) {
  if (name == datastore::kSyncMarkerFileName) {
    // `cairn sync`'s marker (docs/FORMAT.md): small JSON naming the source.
    // It grants nothing: a forget by --remove-vanished is checked as any
    // forget. Not an archive file, so the manifest does not list it.
    auto j = nlohmann::json::parse(AsStringView(data), nullptr, false);
    if (data.size() > datastore::kMaxSyncMarkerBytes || !j.is_object() ||
        !j.contains("source") || !j["source"].is_string()) {
      return InvalidArgumentError(fmt::format(
          "{}: must be a JSON object with a string \"source\", at most {} bytes", name,
          datastore::kMaxSyncMarkerBytes));
    }
    std::lock_guard lock(s.mu);
    if (s.repair) return FailedPreconditionError(kRepairTakesChunksOnly);
    return s.target->WriteFile(name, data);
  }
  if (!IsArchiveFileName(name)) {
    return InvalidArgumentError(fmt::format("'{}' is not the name of an archive file", name));
  }
  BackupSession::FileSum sum;
  std::lock_guard lock(s.mu);
  if (s.repair) return FailedPreconditionError(kRepairTakesChunksOnly);
  if (s.files.contains(name)) {
    return AlreadyExistsError(fmt::format("{} was already uploaded in this session", name));
  }
  if (name.ends_with(".img.fidx")) {
    auto idx = index::FixedIndex::Decode(data);
    if (!idx.ok()) return InvalidArgumentError(fmt::format("{}: {}", name, idx.status().message()));
    CAIRN_RETURN_IF_ERROR(CheckReferences(s, name, *idx, &sum));
    sum.csum = idx->csum();
    sum.size = idx->image_size();
  } else if (name.ends_with(".didx")) {
    auto idx = index::DynamicIndex::Decode(data);
    if (!idx.ok()) return InvalidArgumentError(fmt::format("{}: {}", name, idx.status().message()));
    CAIRN_RETURN_IF_ERROR(CheckReferences(s, name, *idx, &sum));
    sum.csum = idx->csum();
    sum.size = idx->size();
  } else {
    auto header = blob::Check(data);
    if (!header.ok()) {
      return InvalidArgumentError(fmt::format("{}: {}", name, header.status().message()));
    }
    sum.csum = crypto::Sha256(data);
    sum.size = header->raw_size;
    ChunkMode mode;
    mode.encrypted = header->encryption != blob::Encryption::kNone;
    if (mode.encrypted) mode.key_print = header->key_print;
    sum.blob_mode = mode;
  }
  CAIRN_RETURN_IF_ERROR(s.target->WriteFile(name, data));
  s.files.emplace(name, sum);
  return Status::Ok();
}

// The session's files against the manifest: the same files, checksums and
// sizes, and chunks of the manifest's mode only.
static Status CheckManifest(const BackupSession& s, const index::Manifest& manifest) {
  if (manifest.ns != s.snap.group.ns || manifest.type != s.snap.group.type ||
      manifest.id != s.snap.group.id || manifest.time != s.snap.TimeString()) {
    return InvalidArgumentError(fmt::format("the manifest names another snapshot than {}",
                                            s.snap.ToString()));
  }
  const ChunkMode mode = ModeOfManifest(manifest);
  size_t expected = 0;
  auto check = [&](const std::string& file, const crypto::Digest& csum, uint64_t size,
                   bool check_size) -> Status {
    auto it = s.files.find(file);
    if (it == s.files.end()) {
      return InvalidArgumentError(fmt::format("the manifest lists {}, which was not uploaded", file));
    }
    const BackupSession::FileSum& f = it->second;
    if (f.csum != csum || (check_size && f.size != size)) {
      return InvalidArgumentError(
          fmt::format("the manifest's checksum or size of {} does not match the uploaded file", file));
    }
    // A plain id and an encrypted one are never confused: a snapshot holds
    // chunks of its own mode (and key) only.
    if ((mode.encrypted && f.uses_proven) || (!mode.encrypted && f.uses_unproven) ||
        (f.uses_base && mode != s.base_mode) || (f.blob_mode && *f.blob_mode != mode)) {
      return InvalidArgumentError(fmt::format(
          "{} holds chunks of another mode than the manifest ({}): a snapshot is plain or "
          "encrypted with one key throughout",
          file, DescribeMode(mode)));
    }
    ++expected;
    return Status::Ok();
  };
  for (const index::ArchiveEntry& e : manifest.archives) {
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
        CAIRN_RETURN_IF_ERROR(check(e.FileName(), e.csum, e.size, !manifest.encrypted));
        break;
    }
  }
  if (expected != s.files.size()) {
    return InvalidArgumentError(fmt::format(
        "{} files were uploaded but the manifest lists {}", s.files.size(), expected));
  }
  if (mode.encrypted && s.upload_key && *s.upload_key != mode) {
    return InvalidArgumentError(fmt::format(
        "the session's chunks were uploaded {}, but the manifest is {}",
        DescribeMode(*s.upload_key), DescribeMode(mode)));
  }
  return Status::Ok();
}

Result<datastore::SnapshotRef> SessionRegistry::Finish(const std::string& id, ByteSpan stored) {
  std::shared_ptr<BackupSession> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !it->second->started) {
      return NotFoundError(fmt::format("no backup session '{}'", id));
    }
    s = std::move(it->second);
    sessions_.erase(it);
  }
  std::lock_guard lock(s->mu);
  if (s->repair) return FailedPreconditionError(kRepairTakesChunksOnly);
  auto manifest = index::DecodeManifest(stored);
  if (!manifest.ok()) {
    return InvalidArgumentError(fmt::format("manifest: {}", manifest.status().message()));
  }
  CAIRN_RETURN_IF_ERROR(CheckManifest(*s, *manifest));
  // The group becomes the token's now, with its first snapshot: before the
  // commit, so no moment shows a snapshot without its owner; undone when
  // the commit fails. The group lock is held throughout.
  Env& env = s->store->env();
  const std::string owner_file = JoinPath(s->store->GroupDir(s->snap.group), kOwnerFileName);
  if (s->claims_group) {
    CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env, owner_file, AsBytes(s->token + "\n")));
  }
  if (Status c = s->target->Commit(stored); !c.ok()) {
    if (s->claims_group) env.RemoveFile(owner_file).IgnoreError();  // best effort; ours
    return c;
  }
  logger_.Info("backup session {} of {}: {} finished ({} archives)", id, s->token,
               s->snap.ToString(), manifest->archives.size());
  return s->snap;
}

void SessionRegistry::Abort(const std::string& id) {
  std::shared_ptr<BackupSession> s;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end() || !it->second->started) return;
    s = std::move(it->second);
    sessions_.erase(it);
  }
  logger_.Info("{} session {} of {}: {} {} by the client", s->repair ? "repair" : "backup", id,
               s->token, s->snap.ToString(), s->repair ? "ended" : "aborted");
}

std::vector<ChunkMode> SessionRegistry::ReadableModes(const std::string& token,
                                                      const std::string& store_name,
                                                      const crypto::Digest& id) {
  std::vector<ChunkMode> modes;
  std::lock_guard lock(mu_);
  for (const auto& [sid, s] : sessions_) {
    if (s->token != token || s->store_name != store_name || !s->started) continue;
    std::lock_guard slock(s->mu);
    if (s->has_base && s->base.contains(id)) modes.push_back(s->base_mode);
  }
  return modes;
}

bool SessionRegistry::HasSession(const std::string& token, const std::string& store_name) {
  std::lock_guard lock(mu_);
  for (const auto& [sid, s] : sessions_) {
    if (s->token == token && s->store_name == store_name && s->started) return true;
  }
  return false;
}

size_t SessionRegistry::open_sessions() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [sid, s] : sessions_) n += s->started ? 1 : 0;
  return n;
}

}  // namespace cairn::server
