#include "datastore/snapshot_writer.h"

#include <fmt/format.h>

#include "blob/blob.h"

namespace cairn::datastore {

Status RemoveSnapshotDir(Env& env, const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  for (const auto& name : names) CAIRN_RETURN_IF_ERROR(env.RemoveFile(JoinPath(dir, name)));
  return env.RemoveDir(dir);
}

Result<std::unique_ptr<LocalSnapshotTarget>> LocalSnapshotTarget::Begin(const Datastore& store,
                                                                        const SnapshotRef& snap) {
  CAIRN_ASSIGN_OR_RETURN(auto lock, store.LockGroup(snap.group));
  CAIRN_ASSIGN_OR_RETURN(auto registration, store.RegisterWriter());
  Env& env = store.env();
  std::string dir = store.SnapshotDir(snap);
  if (env.Stat(dir).ok()) {
    if (env.Stat(JoinPath(dir, index::kManifestFileName)).ok()) {
      return AlreadyExistsError(
          fmt::format("snapshot {} already exists in datastore {}", snap.ToString(), store.path()));
    }
    // Left by a backup that was killed: we hold the group lock, so nobody
    // else is writing it.
    CAIRN_RETURN_IF_ERROR(RemoveSnapshotDir(env, dir).WithContext(
        fmt::format("removing unfinished snapshot {}", snap.ToString())));
  }
  CAIRN_RETURN_IF_ERROR(env.CreateDir(dir));
  CAIRN_RETURN_IF_ERROR(env.SyncDir(DirName(dir)));
  std::unique_ptr<LocalSnapshotTarget> t(
      new LocalSnapshotTarget(store, std::move(lock), std::move(registration)));
  t->dir_ = dir;
  return t;
}

LocalSnapshotTarget::~LocalSnapshotTarget() {
  if (!committed_ && !dir_.empty()) RemoveSnapshotDir(store_.env(), dir_).IgnoreError();
}

Status LocalSnapshotTarget::WriteFile(const std::string& file, ByteSpan data) {
  Env& env = store_.env();
  std::string path = JoinPath(dir_, file);
  std::string tmp = path + ".tmp";
  {
    CAIRN_ASSIGN_OR_RETURN(auto f, env.OpenWritable(tmp, OpenMode::kTruncate));
    CAIRN_RETURN_IF_ERROR(f->WriteAt(0, data));
    CAIRN_RETURN_IF_ERROR(f->Sync());
    CAIRN_RETURN_IF_ERROR(f->Close());
  }
  return env.Rename(tmp, path);
}

Status LocalSnapshotTarget::Commit(ByteSpan manifest) {
  Env& env = store_.env();
  // Order matters: chunks, then archive files, then the manifest.
  CAIRN_RETURN_IF_ERROR(store_.sink().Flush());
  CAIRN_RETURN_IF_ERROR(env.SyncDir(dir_));
  CAIRN_RETURN_IF_ERROR(WriteFileAtomic(env, JoinPath(dir_, index::kManifestFileName), manifest));
  committed_ = true;
  return Status::Ok();
}

Result<std::unique_ptr<SnapshotWriter>> SnapshotWriter::Begin(const Datastore& store,
                                                              const SnapshotRef& snap) {
  std::unique_ptr<SnapshotTarget> target;
  if (store.remote() != nullptr) {
    CAIRN_ASSIGN_OR_RETURN(target, store.remote()->BeginSnapshot(snap));
  } else {
    CAIRN_ASSIGN_OR_RETURN(target, LocalSnapshotTarget::Begin(store, snap));
  }
  std::unique_ptr<SnapshotWriter> w(new SnapshotWriter(store, snap, std::move(target)));
  w->manifest_.type = snap.group.type;
  w->manifest_.id = snap.group.id;
  w->manifest_.time = snap.TimeString();
  w->manifest_.ns = snap.group.ns;
  return w;
}

SnapshotWriter::~SnapshotWriter() = default;

Status SnapshotWriter::AddImage(const std::string& name, const index::FixedIndex& idx) {
  index::ArchiveEntry entry{name, index::ArchiveKind::kImage, idx.image_size(), idx.csum(),
                            idx.chunk_size()};
  if (manifest_.Find(name))
    return InvalidArgumentError(fmt::format("archive {} given twice", name));
  CAIRN_RETURN_IF_ERROR(target_->WriteFile(entry.FileName(), idx.Encode()));
  manifest_.archives.push_back(std::move(entry));
  return Status::Ok();
}

Status SnapshotWriter::AddTree(const std::string& name, const index::DynamicIndex& meta,
                               const index::DynamicIndex& data) {
  if (manifest_.Find(name))
    return InvalidArgumentError(fmt::format("archive {} given twice", name));
  index::ArchiveEntry entry{name, index::ArchiveKind::kTree, data.size(), data.csum(), 0};
  entry.meta_size = meta.size();
  entry.meta_csum = meta.csum();
  CAIRN_RETURN_IF_ERROR(target_->WriteFile(entry.MetaFileName(), meta.Encode()));
  CAIRN_RETURN_IF_ERROR(target_->WriteFile(entry.FileName(), data.Encode()));
  manifest_.archives.push_back(std::move(entry));
  return Status::Ok();
}

Status SnapshotWriter::AddBlob(const std::string& name, ByteSpan plaintext) {
  if (manifest_.Find(name))
    return InvalidArgumentError(fmt::format("archive {} given twice", name));
  blob::EncodeOptions options;
  options.crypt = store_.key();
  CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(plaintext, options));
  index::ArchiveEntry entry{name, index::ArchiveKind::kBlob, plaintext.size(),
                            crypto::Sha256(stored), 0};
  CAIRN_RETURN_IF_ERROR(target_->WriteFile(entry.FileName(), stored));
  manifest_.archives.push_back(std::move(entry));
  return Status::Ok();
}

Status SnapshotWriter::Commit(const std::string& created_by) {
  manifest_.created_unix = store_.env().NowUnixSeconds();
  manifest_.created_by = created_by;
  CAIRN_ASSIGN_OR_RETURN(Bytes stored, index::EncodeManifest(manifest_, store_.key()));
  return target_->Commit(stored);
}

}  // namespace cairn::datastore
