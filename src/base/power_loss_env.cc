#include "base/power_loss_env.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "base/splitmix64.h"

namespace cairn {

struct PowerLossEnv::Inode {
  bool is_dir = false;
  // Files: contents and access time as the system sees them, and as last
  // made durable.
  Bytes data;
  Bytes durable;
  int64_t atime = -1;  // -1: leave as the target sets it
  int64_t durable_atime = -1;
  // Directories: entries (name -> inode) now, and at the last fsync.
  std::map<std::string, uint64_t> entries;
  std::map<std::string, uint64_t> durable_entries;
};

namespace {

Status CutError(const std::string& what) {
  return AbortedError(fmt::format("{}: power cut (simulated)", what));
}

class PlReadable final : public ReadableFile {
 public:
  PlReadable(const PowerLossEnv& env, std::unique_ptr<ReadableFile> base)
      : env_(env), base_(std::move(base)) {}
  Result<size_t> ReadAt(uint64_t offset, std::span<uint8_t> buf) override {
    CAIRN_RETURN_IF_ERROR(env_.CheckAlive(base_->path()));
    return base_->ReadAt(offset, buf);
  }
  Result<uint64_t> Size() override {
    CAIRN_RETURN_IF_ERROR(env_.CheckAlive(base_->path()));
    return base_->Size();
  }
  Result<FileInfo> Stat() override {
    CAIRN_RETURN_IF_ERROR(env_.CheckAlive(base_->path()));
    return base_->Stat();
  }
  const std::string& path() const override { return base_->path(); }

 private:
  const PowerLossEnv& env_;
  std::unique_ptr<ReadableFile> base_;
};

// `ino` 0: a file outside root, passed through.
class PlWritable final : public WritableFile {
 public:
  PlWritable(PowerLossEnv& env, std::unique_ptr<WritableFile> base, uint64_t ino, bool append_mode)
      : env_(env), base_(std::move(base)), ino_(ino), append_mode_(append_mode) {}

  Status WriteAt(uint64_t offset, ByteSpan data) override {
    if (ino_ == 0) {
      CAIRN_RETURN_IF_ERROR(env_.CheckAlive(path()));
      return base_->WriteAt(offset, data);
    }
    if (append_mode_) return base_->WriteAt(offset, data);  // refused by the target
    uint64_t end = 0;
    return env_.FileWrite(ino_, path(), offset, data, /*via_append=*/false, /*at_end=*/false,
                          *base_, &end);
  }
  Status Append(ByteSpan data) override {
    if (ino_ == 0) {
      CAIRN_RETURN_IF_ERROR(env_.CheckAlive(path()));
      return base_->Append(data);
    }
    // Without kAppend, Append writes at the descriptor's position, which
    // only Append moves; with it, at the end of the file.
    uint64_t end = 0;
    CAIRN_RETURN_IF_ERROR(env_.FileWrite(ino_, path(), pos_, data, /*via_append=*/true,
                                         /*at_end=*/append_mode_, *base_, &end));
    pos_ = end;
    return Status::Ok();
  }
  Status Truncate(uint64_t size) override {
    if (ino_ == 0) {
      CAIRN_RETURN_IF_ERROR(env_.CheckAlive(path()));
      return base_->Truncate(size);
    }
    return env_.FileTruncate(ino_, path(), size, *base_);
  }
  bool EnableDirectWrites() override { return ino_ == 0 && base_->EnableDirectWrites(); }
  Status Sync() override {
    if (ino_ == 0) {
      CAIRN_RETURN_IF_ERROR(env_.CheckAlive(path()));
      return base_->Sync();
    }
    return env_.FileSync(ino_, path(), *base_);
  }
  Status Close() override { return base_->Close(); }
  Result<FileInfo> Stat() override {
    CAIRN_RETURN_IF_ERROR(env_.CheckAlive(path()));
    return base_->Stat();
  }
  const std::string& path() const override { return base_->path(); }

 private:
  PowerLossEnv& env_;
  std::unique_ptr<WritableFile> base_;
  uint64_t ino_;
  bool append_mode_;
  uint64_t pos_ = 0;
};

}  // namespace

PowerLossEnv::PowerLossEnv(Env* target, std::string root)
    : EnvWrapper(target), root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
}

PowerLossEnv::~PowerLossEnv() = default;

Status PowerLossEnv::Start() {
  MutexLock lock(mu_);
  inodes_.clear();
  dirty_.clear();
  ops_ = 0;
  sync_ops_ = 0;
  cut_before_op_ = 0;
  cut_before_sync_ = 0;
  cut_ = false;
  root_ino_ = NewInode(/*is_dir=*/true);
  return Scan(root_, root_ino_);
}

// Reads the tree at `path` on the target into inode `ino`, as durable.
Status PowerLossEnv::Scan(const std::string& path, uint64_t ino) {
  CAIRN_ASSIGN_OR_RETURN(auto names, target()->ListDir(path));
  for (const auto& name : names) {
    std::string child = JoinPath(path, name);
    CAIRN_ASSIGN_OR_RETURN(FileInfo info, target()->Stat(child));
    uint64_t c = NewInode(info.is_dir);
    inodes_[ino]->entries[name] = c;
    if (info.is_dir) {
      CAIRN_RETURN_IF_ERROR(Scan(child, c));
    } else {
      CAIRN_ASSIGN_OR_RETURN(inodes_[c]->data, ReadWholeFile(*target(), child, uint64_t{1} << 32));
      // Reading may have moved the access time (relatime); put it back.
      CAIRN_RETURN_IF_ERROR(target()->SetAccessTime(child, info.atime_ns));
      inodes_[c]->atime = info.atime_ns;
      SyncInode(c);
    }
  }
  SyncInode(ino);
  return Status::Ok();
}

uint64_t PowerLossEnv::NewInode(bool is_dir) {
  uint64_t ino = next_ino_++;
  auto node = std::make_unique<Inode>();
  node->is_dir = is_dir;
  inodes_[ino] = std::move(node);
  return ino;
}

void PowerLossEnv::SyncInode(uint64_t ino) {
  Inode& n = *inodes_[ino];
  if (n.is_dir) {
    n.durable_entries = n.entries;
  } else {
    n.durable = n.data;
    n.durable_atime = n.atime;
  }
}

void PowerLossEnv::CutBeforeOp(uint64_t n) {
  MutexLock lock(mu_);
  cut_before_op_ = n;
}

void PowerLossEnv::CutBeforeSync(uint64_t n) {
  MutexLock lock(mu_);
  cut_before_sync_ = n;
}

void PowerLossEnv::CutNow() {
  MutexLock lock(mu_);
  cut_ = true;
}

bool PowerLossEnv::is_cut() const {
  MutexLock lock(mu_);
  return cut_;
}

uint64_t PowerLossEnv::ops() const {
  MutexLock lock(mu_);
  return ops_;
}

uint64_t PowerLossEnv::sync_ops() const {
  MutexLock lock(mu_);
  return sync_ops_;
}

Status PowerLossEnv::CheckAlive(const std::string& path) const {
  MutexLock lock(mu_);
  if (cut_) return CutError(path);
  return Status::Ok();
}

Status PowerLossEnv::Tick(OpKind kind, const std::string& what) {
  if (cut_) return CutError(what);
  uint64_t op = ops_ + 1;
  uint64_t sync = sync_ops_ + (kind == OpKind::kSync ? 1 : 0);
  if ((cut_before_op_ != 0 && op >= cut_before_op_) ||
      (kind == OpKind::kSync && cut_before_sync_ != 0 && sync >= cut_before_sync_)) {
    cut_ = true;
    return CutError(what);
  }
  ops_ = op;
  sync_ops_ = sync;
  return Status::Ok();
}

bool PowerLossEnv::Split(const std::string& path, std::vector<std::string>* parts) const {
  if (path.compare(0, root_.size(), root_) != 0) return false;
  if (path.size() > root_.size() && path[root_.size()] != '/' && root_ != "/") return false;
  parts->clear();
  size_t i = root_.size();
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") return false;  // not modelled; tests never use it
    if (!part.empty() && part != ".") parts->push_back(std::move(part));
    i = j + 1;
  }
  return true;
}

std::optional<uint64_t> PowerLossEnv::Lookup(const std::vector<std::string>& parts) const {
  uint64_t ino = root_ino_;
  for (const auto& part : parts) {
    const Inode& n = *inodes_.at(ino);
    auto it = n.entries.find(part);
    if (!n.is_dir || it == n.entries.end()) return std::nullopt;
    ino = it->second;
  }
  return ino;
}

// The directory inode holding `path` (under root, not root itself) and the
// last name; nullopt for paths outside root or under a directory the model
// does not know.
std::optional<uint64_t> PowerLossEnv::ParentOf(const std::string& path, std::string* name) const {
  std::vector<std::string> parts;
  if (!Split(path, &parts) || parts.empty()) return std::nullopt;
  *name = parts.back();
  parts.pop_back();
  auto dir = Lookup(parts);
  if (!dir || !inodes_.at(*dir)->is_dir) return std::nullopt;
  return dir;
}

// --- Files -----------------------------------------------------------------

Result<std::unique_ptr<ReadableFile>> PowerLossEnv::OpenReadable(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(CheckAlive(path));
  CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenReadable(path));
  return std::unique_ptr<ReadableFile>(std::make_unique<PlReadable>(*this, std::move(base)));
}

Result<std::unique_ptr<WritableFile>> PowerLossEnv::OpenWritable(const std::string& path,
                                                                 OpenMode mode) {
  MutexLock lock(mu_);
  std::string name;
  auto dir = ParentOf(path, &name);
  if (!dir) {
    if (cut_) return CutError(path);
    CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenWritable(path, mode));
    return std::unique_ptr<WritableFile>(
        std::make_unique<PlWritable>(*this, std::move(base), 0, false));
  }
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("open {}", path)));
  CAIRN_ASSIGN_OR_RETURN(auto base, target()->OpenWritable(path, mode));
  Inode& parent = *inodes_[*dir];
  uint64_t ino;
  if (auto it = parent.entries.find(name); it != parent.entries.end()) {
    ino = it->second;
  } else {
    ino = NewInode(/*is_dir=*/false);
    parent.entries[name] = ino;
    MarkDirty(*dir);
  }
  if (mode == OpenMode::kTruncate) inodes_[ino]->data.clear();
  MarkDirty(ino);
  return std::unique_ptr<WritableFile>(
      std::make_unique<PlWritable>(*this, std::move(base), ino, mode == OpenMode::kAppend));
}

Status PowerLossEnv::FileWrite(uint64_t ino, const std::string& path, uint64_t offset,
                               ByteSpan data, bool via_append, bool at_end, WritableFile& base,
                               uint64_t* end) {
  MutexLock lock(mu_);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("write {}", path)));
  Inode& n = *inodes_[ino];
  if (via_append) {
    // An O_APPEND descriptor writes at the end of the file; another at its
    // position (`offset`).
    CAIRN_RETURN_IF_ERROR(base.Append(data));
    if (at_end) offset = n.data.size();
  } else {
    CAIRN_RETURN_IF_ERROR(base.WriteAt(offset, data));
  }
  if (n.data.size() < offset + data.size()) n.data.resize(offset + data.size());
  if (!data.empty()) std::memcpy(n.data.data() + offset, data.data(), data.size());
  *end = offset + data.size();
  MarkDirty(ino);
  return Status::Ok();
}

Status PowerLossEnv::FileTruncate(uint64_t ino, const std::string& path, uint64_t size,
                                  WritableFile& base) {
  MutexLock lock(mu_);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("truncate {}", path)));
  CAIRN_RETURN_IF_ERROR(base.Truncate(size));
  inodes_[ino]->data.resize(size);
  MarkDirty(ino);
  return Status::Ok();
}

Status PowerLossEnv::FileSync(uint64_t ino, const std::string& path, WritableFile& base) {
  MutexLock lock(mu_);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kSync, fmt::format("fsync {}", path)));
  CAIRN_RETURN_IF_ERROR(base.Sync());
  SyncInode(ino);
  return Status::Ok();
}

// --- Namespace -------------------------------------------------------------

Result<FileInfo> PowerLossEnv::Stat(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(CheckAlive(path));
  return target()->Stat(path);
}

Result<std::vector<std::string>> PowerLossEnv::ListDir(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(CheckAlive(path));
  return target()->ListDir(path);
}

Result<std::unique_ptr<Dir>> PowerLossEnv::OpenDir(const std::string& path) {
  CAIRN_RETURN_IF_ERROR(CheckAlive(path));
  std::vector<std::string> parts;
  if (Split(path, &parts)) {
    return FailedPreconditionError(
        fmt::format("open directory {}: under the power-loss model's root, which it does not "
                    "track through directory handles",
                    path));
  }
  return target()->OpenDir(path);
}

Status PowerLossEnv::CreateDir(const std::string& path) {
  MutexLock lock(mu_);
  std::string name;
  auto dir = ParentOf(path, &name);
  if (!dir) return cut_ ? CutError(path) : target()->CreateDir(path);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("mkdir {}", path)));
  CAIRN_RETURN_IF_ERROR(target()->CreateDir(path));
  inodes_[*dir]->entries[name] = NewInode(/*is_dir=*/true);
  MarkDirty(*dir);
  return Status::Ok();
}

Status PowerLossEnv::RenameImpl(const std::string& from, const std::string& to, bool no_replace) {
  MutexLock lock(mu_);
  std::string from_name, to_name;
  auto from_dir = ParentOf(from, &from_name);
  auto to_dir = ParentOf(to, &to_name);
  if (!from_dir && !to_dir) {
    if (cut_) return CutError(from);
    return no_replace ? target()->RenameNoReplace(from, to) : target()->Rename(from, to);
  }
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("rename {}", from)));
  if (!from_dir || !to_dir) {
    return UnimplementedError(
        fmt::format("rename {} to {}: into or out of the modelled tree", from, to));
  }
  CAIRN_RETURN_IF_ERROR(no_replace ? target()->RenameNoReplace(from, to)
                                   : target()->Rename(from, to));
  Inode& src = *inodes_[*from_dir];
  auto it = src.entries.find(from_name);
  if (it == src.entries.end()) return Status::Ok();  // unknown to the model: stays unknown
  uint64_t ino = it->second;
  src.entries.erase(it);
  inodes_[*to_dir]->entries[to_name] = ino;
  MarkDirty(*from_dir);
  MarkDirty(*to_dir);
  return Status::Ok();
}

Status PowerLossEnv::Rename(const std::string& from, const std::string& to) {
  return RenameImpl(from, to, /*no_replace=*/false);
}

Status PowerLossEnv::RenameNoReplace(const std::string& from, const std::string& to) {
  return RenameImpl(from, to, /*no_replace=*/true);
}

Status PowerLossEnv::RemoveFile(const std::string& path) {
  MutexLock lock(mu_);
  std::string name;
  auto dir = ParentOf(path, &name);
  if (!dir) return cut_ ? CutError(path) : target()->RemoveFile(path);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("remove {}", path)));
  CAIRN_RETURN_IF_ERROR(target()->RemoveFile(path));
  inodes_[*dir]->entries.erase(name);
  MarkDirty(*dir);
  return Status::Ok();
}

Status PowerLossEnv::RemoveDir(const std::string& path) {
  MutexLock lock(mu_);
  std::string name;
  auto dir = ParentOf(path, &name);
  if (!dir) return cut_ ? CutError(path) : target()->RemoveDir(path);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("rmdir {}", path)));
  CAIRN_RETURN_IF_ERROR(target()->RemoveDir(path));
  inodes_[*dir]->entries.erase(name);
  MarkDirty(*dir);
  return Status::Ok();
}

Status PowerLossEnv::SyncDir(const std::string& path) {
  MutexLock lock(mu_);
  std::vector<std::string> parts;
  if (!Split(path, &parts)) return cut_ ? CutError(path) : target()->SyncDir(path);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kSync, fmt::format("fsync directory {}", path)));
  CAIRN_RETURN_IF_ERROR(target()->SyncDir(path));
  if (auto ino = Lookup(parts); ino && inodes_[*ino]->is_dir) SyncInode(*ino);
  return Status::Ok();
}

Status PowerLossEnv::SyncFilesystem(const std::string& path) {
  MutexLock lock(mu_);
  std::vector<std::string> parts;
  if (!Split(path, &parts)) return cut_ ? CutError(path) : target()->SyncFilesystem(path);
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kSync, fmt::format("syncfs {}", path)));
  CAIRN_RETURN_IF_ERROR(target()->SyncFilesystem(path));
  for (uint64_t ino : dirty_) SyncInode(ino);
  dirty_.clear();
  return Status::Ok();
}

Result<std::unique_ptr<FileLock>> PowerLossEnv::TryLock(const std::string& path, bool exclusive) {
  MutexLock lock(mu_);
  std::string name;
  auto dir = ParentOf(path, &name);
  if (!dir) {
    if (cut_) return CutError(path);
    return target()->TryLock(path, exclusive);
  }
  CAIRN_RETURN_IF_ERROR(Tick(OpKind::kPlain, fmt::format("lock {}", path)));
  bool existed = target()->Stat(path).ok();
  auto held = target()->TryLock(path, exclusive);  // creates the file when absent
  if (!existed && target()->Stat(path).ok()) {
    Inode& parent = *inodes_[*dir];
    if (!parent.entries.contains(name)) {
      parent.entries[name] = NewInode(/*is_dir=*/false);
      MarkDirty(*dir);
    }
  }
  return held;
}

Result<std::unique_ptr<FileLock>> PowerLossEnv::TryLockExisting(const std::string& path,
                                                                bool exclusive) {
  CAIRN_RETURN_IF_ERROR(CheckAlive(path));
  return target()->TryLockExisting(path, exclusive);
}

Status PowerLossEnv::SetAccessTime(const std::string& path, int64_t unix_nanos) {
  MutexLock lock(mu_);
  if (cut_) return CutError(path);
  CAIRN_RETURN_IF_ERROR(target()->SetAccessTime(path, unix_nanos));
  std::vector<std::string> parts;
  if (Split(path, &parts)) {
    if (auto ino = Lookup(parts); ino && !inodes_[*ino]->is_dir) {
      inodes_[*ino]->atime = unix_nanos;
      MarkDirty(*ino);
    }
  }
  return Status::Ok();
}

// --- Remount -----------------------------------------------------------------

Status PowerLossEnv::Wipe(const std::string& dir) {
  CAIRN_ASSIGN_OR_RETURN(auto names, target()->ListDir(dir));
  for (const auto& name : names) {
    std::string path = JoinPath(dir, name);
    CAIRN_ASSIGN_OR_RETURN(FileInfo info, target()->Stat(path));
    if (info.is_dir) {
      CAIRN_RETURN_IF_ERROR(Wipe(path));
      CAIRN_RETURN_IF_ERROR(target()->RemoveDir(path));
    } else {
      CAIRN_RETURN_IF_ERROR(target()->RemoveFile(path));
    }
  }
  return Status::Ok();
}

namespace {

// The contents a file shows after the cut: its synced contents, or with a
// torn tail, when it only grew since, those plus a page-aligned part of
// what was written after them.
ByteSpan ContentsAfterCut(const Bytes& durable, const Bytes& data, PowerLossEnv::Data mode,
                          uint64_t seed, uint64_t ino) {
  constexpr uint64_t kPage = 4096;
  if (mode != PowerLossEnv::Data::kTornTail || data.size() <= durable.size() ||
      !std::equal(durable.begin(), durable.end(), data.begin())) {
    return durable;
  }
  uint64_t pages = (data.size() - durable.size() + kPage - 1) / kPage;
  // One draw per file, from the seed and the inode (splitmix64).
  const uint64_t z = SplitMix64Mix(seed + ino * kSplitMix64Gamma);
  uint64_t keep = std::min<uint64_t>(data.size(), durable.size() + (z % (pages + 1)) * kPage);
  return ByteSpan(data.data(), keep);
}

}  // namespace

Status PowerLossEnv::Rebuild(const std::string& path, uint64_t ino, const RebuildOptions& options,
                             std::unordered_set<uint64_t>* seen) {
  const Inode& dir = *inodes_.at(ino);
  const auto& entries =
      options.metadata == Metadata::kAllMetadata ? dir.entries : dir.durable_entries;
  for (const auto& [name, child] : entries) {
    const Inode& n = *inodes_.at(child);
    std::string child_path = JoinPath(path, name);
    if (n.is_dir) {
      // A directory moved between two directories, one of them synced, may
      // show in both; a real file system shows it once.
      if (!seen->insert(child).second) continue;
      CAIRN_RETURN_IF_ERROR(target()->CreateDir(child_path));
      CAIRN_RETURN_IF_ERROR(Rebuild(child_path, child, options, seen));
      continue;
    }
    {
      CAIRN_ASSIGN_OR_RETURN(auto f, target()->OpenWritable(child_path, OpenMode::kCreateNew));
      ByteSpan contents = ContentsAfterCut(n.durable, n.data, options.data, options.seed, child);
      if (!contents.empty()) CAIRN_RETURN_IF_ERROR(f->WriteAt(0, contents));
      CAIRN_RETURN_IF_ERROR(f->Close());
    }
    if (n.durable_atime >= 0) {
      CAIRN_RETURN_IF_ERROR(target()->SetAccessTime(child_path, n.durable_atime));
    }
  }
  return Status::Ok();
}

Status PowerLossEnv::Remount(Metadata metadata, Data data, uint64_t seed) {
  MutexLock lock(mu_);
  CAIRN_RETURN_IF_ERROR(Wipe(root_));
  std::unordered_set<uint64_t> seen{root_ino_};
  CAIRN_RETURN_IF_ERROR(Rebuild(root_, root_ino_, {metadata, data, seed}, &seen));
  inodes_.clear();
  dirty_.clear();
  root_ino_ = NewInode(/*is_dir=*/true);
  CAIRN_RETURN_IF_ERROR(Scan(root_, root_ino_));
  ops_ = 0;
  sync_ops_ = 0;
  cut_before_op_ = 0;
  cut_before_sync_ = 0;
  cut_ = false;
  return Status::Ok();
}

}  // namespace cairn
