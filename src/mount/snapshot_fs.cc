#include "mount/snapshot_fs.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "access/chunk_map.h"

namespace cairn::mount {
namespace {

constexpr uint32_t kDirMode = S_IFDIR | 0555;
// A missed lookup reads a listing again when it is older than this (a new
// snapshot's name typed right after its backup).
constexpr int64_t kMissRefreshNs = 100'000'000;

enum class VKind { kNamespace, kNsList, kType, kGroup, kSnapshot, kLatest, kImage, kBlob, kTree };

uint64_t TreeIno(uint32_t tree_id, uint32_t entry) { return (uint64_t{tree_id} << 32) | entry; }
bool IsTreeIno(uint64_t ino) { return (ino >> 32) != 0; }

uint32_t TypeBits(tree::EntryKind k) {
  switch (k) {
    case tree::EntryKind::kDirectory: return S_IFDIR;
    case tree::EntryKind::kSymlink: return S_IFLNK;
    case tree::EntryKind::kCharDevice: return S_IFCHR;
    case tree::EntryKind::kBlockDevice: return S_IFBLK;
    case tree::EntryKind::kFifo: return S_IFIFO;
    default: return S_IFREG;
  }
}

Status NotADirectory(std::string_view what) {
  return InvalidArgumentError(fmt::format("{} is not a directory", what));
}

}  // namespace

struct SnapshotFs::VNode {
  VKind kind = VKind::kNamespace;
  uint64_t parent = 0;
  std::string ns;                // kNamespace, kNsList, kType
  std::string type;              // kType
  datastore::GroupRef group;     // kGroup, kLatest
  datastore::SnapshotRef snap;   // kSnapshot and its archives
  index::ArchiveEntry archive;   // kImage, kBlob, kTree
  std::optional<uint64_t> allocated;  // kImage: bytes of its non-zero chunks, when known
  std::map<std::string, uint64_t, std::less<>> children;  // as last listed
  int64_t listed_ns = -1;        // monotonic time of that listing; -1: never
  int64_t mtime_ns = 0;
  std::string link_target;       // kLatest
  uint32_t tree_id = 0;          // kTree
};

struct SnapshotFs::LoadedTree {
  std::unique_ptr<access::TreeView> view;
  std::unique_ptr<access::StreamReader> payload;
  uint64_t bytes = 0;
};

struct SnapshotFs::Tree {
  datastore::SnapshotRef snap;
  index::ArchiveEntry archive;
  Mutex load_mu;                       // one load at a time
  // Guarded by SnapshotFs::mu_ (a comment: clang cannot name the enclosing
  // object's mutex from here).
  std::shared_ptr<LoadedTree> loaded;
  uint64_t last_use = 0;
};

// Held by an open file: its snapshot's shared lock stays while any is open.
struct SnapshotFs::SnapshotPin {
  SnapshotFs* fs;
  std::string key;
  ~SnapshotPin() { fs->Unpin(key); }
};

class SnapshotFs::ArchiveFile final : public SnapshotFs::File {
 public:
  ArchiveFile(std::shared_ptr<access::StreamReader> reader, std::shared_ptr<LoadedTree> tree,
              uint64_t base, uint64_t size, std::unique_ptr<SnapshotPin> pin)
      : reader_(std::move(reader)), tree_(std::move(tree)), base_(base), size_(size),
        pin_(std::move(pin)) {}
  Result<size_t> Read(uint64_t offset, MutableByteSpan out) override {
    if (offset >= size_) return size_t{0};
    const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), size_ - offset));
    access::StreamReader& r = reader_ ? *reader_ : *tree_->payload;
    CAIRN_RETURN_IF_ERROR(r.Read(base_ + offset, out.first(n)));
    return n;
  }
  uint64_t size() const override { return size_; }
  bool direct_io() const override { return reader_ != nullptr; }
  Result<uint64_t> Seek(uint64_t offset, bool data) const override {
    if (!reader_) return File::Seek(offset, data);  // a tree's file: all data
    if (offset >= size_) return OutOfRangeError("seek past the end");
    const access::ChunkMap& map = reader_->map();
    for (size_t i = map.Find(offset); i < map.count(); ++i) {
      if (map.IsZero(i) != data) return std::max(offset, map.Start(i));
    }
    if (data) return OutOfRangeError("no data after the offset");
    return size_;
  }

 private:
  std::shared_ptr<access::StreamReader> reader_;  // an image
  std::shared_ptr<LoadedTree> tree_;              // or a tree's payload
  uint64_t base_, size_;
  std::unique_ptr<SnapshotPin> pin_;
};

class SnapshotFs::BlobFile final : public SnapshotFs::File {
 public:
  BlobFile(Bytes data, std::unique_ptr<SnapshotPin> pin) : data_(std::move(data)), pin_(std::move(pin)) {}
  Result<size_t> Read(uint64_t offset, MutableByteSpan out) override {
    if (offset >= data_.size()) return size_t{0};
    const size_t n = std::min<size_t>(out.size(), data_.size() - offset);
    std::memcpy(out.data(), data_.data() + offset, n);
    return n;
  }
  uint64_t size() const override { return data_.size(); }

 private:
  Bytes data_;
  std::unique_ptr<SnapshotPin> pin_;
};

Result<uint64_t> SnapshotFs::File::Seek(uint64_t offset, bool data) const {
  if (offset >= size()) return OutOfRangeError("seek past the end");
  return data ? offset : size();
}

SnapshotFs::SnapshotFs(const datastore::Datastore& store, SnapshotFsOptions options)
    : store_(store), options_(std::move(options)), started_ns_(store.env().NowUnixNanos()),
      store_refreshed_ns_(store.env().NowMonotonicNanos()) {}

SnapshotFs::~SnapshotFs() = default;

Result<std::unique_ptr<SnapshotFs>> SnapshotFs::Open(const datastore::Datastore& store,
                                                     const std::string& ns,
                                                     const std::string& scope,
                                                     SnapshotFsOptions options) {
  std::unique_ptr<SnapshotFs> fs(new SnapshotFs(store, std::move(options)));
  VNode root;
  root.mtime_ns = fs->started_ns_;
  const auto slashes = std::count(scope.begin(), scope.end(), '/');
  if (scope.empty()) {
    CAIRN_RETURN_IF_ERROR(datastore::ValidateNamespace(ns));
    root.kind = VKind::kNamespace;
    root.ns = ns;
  } else if (slashes == 1) {
    CAIRN_ASSIGN_OR_RETURN(root.group, datastore::ParseGroup(ns, scope));
    CAIRN_ASSIGN_OR_RETURN(auto snaps, store.ListSnapshots(root.group));
    if (snaps.empty()) {
      return NotFoundError(fmt::format("group {} has no snapshots in {}", scope, store.DisplayName()));
    }
    root.kind = VKind::kGroup;
  } else if (slashes == 2) {
    CAIRN_ASSIGN_OR_RETURN(datastore::SnapshotSpec spec, datastore::ParseSnapshotSpec(ns, scope));
    CAIRN_ASSIGN_OR_RETURN(root.snap, store.Resolve(spec));
    root.kind = VKind::kSnapshot;
    root.mtime_ns = root.snap.time * 1'000'000'000;
  } else {
    return InvalidArgumentError(fmt::format(
        "'{}': mount a group (TYPE/ID), a snapshot (TYPE/ID/TIME or TYPE/ID/latest), or name "
        "neither to mount every snapshot",
        scope));
  }
  MutexLock lock(fs->mu_);
  fs->AddLocked(std::move(root));
  return fs;
}

SnapshotFs::VNode* SnapshotFs::NodeLocked(uint64_t ino) {
  if (ino == 0 || ino > nodes_.size()) return nullptr;
  return nodes_[ino - 1].get();
}

uint64_t SnapshotFs::AddLocked(VNode node) {
  nodes_.push_back(std::make_unique<VNode>(std::move(node)));
  return nodes_.size();
}

uint64_t SnapshotFs::ChildLocked(uint64_t parent, const std::string& name, VNode node) {
  VNode* p = NodeLocked(parent);
  if (auto it = p->children.find(name); it != p->children.end()) {
    VNode* existing = NodeLocked(it->second);
    existing->link_target = node.link_target;  // `latest` moves on
    existing->mtime_ns = node.mtime_ns;
    return it->second;
  }
  node.parent = parent;
  if (node.kind == VKind::kTree) {
    auto t = std::make_unique<Tree>();
    t->snap = node.snap;
    t->archive = node.archive;
    trees_.push_back(std::move(t));
    node.tree_id = static_cast<uint32_t>(trees_.size());
  }
  const uint64_t ino = AddLocked(std::move(node));
  NodeLocked(parent)->children.emplace(name, ino);  // `p` may have moved: look again
  return ino;
}

Status SnapshotFs::RefreshLocked(uint64_t ino, bool force) {
  VNode* n = NodeLocked(ino);
  if (n->kind == VKind::kSnapshot) return ListSnapshotLocked(ino);
  const int64_t now = store_.env().NowMonotonicNanos();
  if (n->listed_ns >= 0 && (now - n->listed_ns < (force ? kMissRefreshNs : options_.refresh_ns))) {
    return Status::Ok();
  }
  if (store_.refreshable() && now - store_refreshed_ns_ >= options_.store_refresh_ns) {
    store_refreshed_ns_ = now;
    // A failure leaves the listings as they were (the server may be back later).
    Status s = store_.Refresh();
    if (!s.ok() && options_.logger != nullptr) {
      options_.logger->Warn("reading the snapshot list again: {}", s.message());
    }
    n = NodeLocked(ino);
  }
  std::vector<std::pair<std::string, VNode>> kids;
  int64_t newest = -1;
  switch (n->kind) {
    case VKind::kNamespace: {
      CAIRN_ASSIGN_OR_RETURN(auto groups, store_.ListGroups(n->ns));
      std::set<std::string> types;
      for (const auto& g : groups) types.insert(g.type);
      for (const auto& t : types) {
        VNode k;
        k.kind = VKind::kType;
        k.ns = n->ns;
        k.type = t;
        kids.emplace_back(t, std::move(k));
      }
      CAIRN_ASSIGN_OR_RETURN(auto children, store_.ListNamespaces(n->ns));
      if (!children.empty()) {
        VNode k;
        k.kind = VKind::kNsList;
        k.ns = n->ns;
        kids.emplace_back("ns", std::move(k));
      }
      break;
    }
    case VKind::kNsList: {
      CAIRN_ASSIGN_OR_RETURN(auto children, store_.ListNamespaces(n->ns));
      for (const auto& full : children) {
        VNode k;
        k.kind = VKind::kNamespace;
        k.ns = full;
        kids.emplace_back(full.substr(full.rfind('/') + 1), std::move(k));
      }
      break;
    }
    case VKind::kType: {
      CAIRN_ASSIGN_OR_RETURN(auto groups, store_.ListGroups(n->ns));
      for (const auto& g : groups) {
        if (g.type != n->type) continue;
        VNode k;
        k.kind = VKind::kGroup;
        k.group = g;
        kids.emplace_back(g.id, std::move(k));
      }
      break;
    }
    case VKind::kGroup: {
      CAIRN_ASSIGN_OR_RETURN(auto snaps, store_.ListSnapshots(n->group));
      for (const auto& s : snaps) {
        VNode k;
        k.kind = VKind::kSnapshot;
        k.snap = s;
        k.mtime_ns = s.time * 1'000'000'000;
        kids.emplace_back(s.TimeString(), std::move(k));
        newest = std::max(newest, s.time);
      }
      if (!snaps.empty()) {
        VNode k;
        k.kind = VKind::kLatest;
        k.group = n->group;
        k.mtime_ns = newest * 1'000'000'000;
        k.link_target = snaps.back().TimeString();
        kids.emplace_back("latest", std::move(k));
      }
      break;
    }
    default:
      return Status::Ok();
  }
  std::map<std::string, uint64_t, std::less<>> fresh;
  for (auto& [name, node] : kids) fresh.emplace(name, ChildLocked(ino, name, std::move(node)));
  n = NodeLocked(ino);
  n->children = std::move(fresh);
  n->listed_ns = now;
  if (newest >= 0) n->mtime_ns = newest * 1'000'000'000;
  for (auto& [name, child] : n->children) {
    VNode* c = NodeLocked(child);
    if (c->kind == VKind::kType || c->kind == VKind::kNsList || c->kind == VKind::kNamespace) {
      c->mtime_ns = started_ns_;
    }
  }
  return Status::Ok();
}

Status SnapshotFs::ListSnapshotLocked(uint64_t ino) {
  VNode* n = NodeLocked(ino);
  if (n->listed_ns >= 0) return Status::Ok();  // a snapshot never changes
  const datastore::SnapshotRef snap = n->snap;
  auto manifest = store_.ReadManifest(snap);
  if (!manifest.ok()) {
    if (manifest.status().code() == StatusCode::kNotFound) {
      return NotFoundError(fmt::format("snapshot {} is gone", snap.ToString()));
    }
    return manifest.status();
  }
  // An image's holes (its zero chunks) from its index, so stat's st_blocks
  // tells `cp` and `du` the truth. Unknown when the index cannot be read or
  // the key to recognise zero chunks is missing: then all of it is data.
  const auto crypt = store_.CryptFor(*manifest);
  auto allocated = [&](const index::ArchiveEntry& a) -> std::optional<uint64_t> {
    if (a.kind != index::ArchiveKind::kImage || !crypt.ok()) return std::nullopt;
    auto idx = store_.ReadImageIndex(snap, a);
    if (!idx.ok()) return std::nullopt;
    const auto map = access::MapImage(std::move(*idx), *crypt);
    uint64_t bytes = 0;
    for (size_t i = 0; i < map->count(); ++i) {
      if (!map->IsZero(i)) bytes += map->Length(i);
    }
    return bytes;
  };
  for (const auto& a : manifest->archives) {
    VNode child;
    child.snap = snap;
    child.archive = a;
    child.allocated = allocated(a);
    child.mtime_ns = snap.time * 1'000'000'000;
    child.kind = a.kind == index::ArchiveKind::kImage  ? VKind::kImage
                 : a.kind == index::ArchiveKind::kBlob ? VKind::kBlob
                                                       : VKind::kTree;
    ChildLocked(ino, a.name, std::move(child));
  }
  NodeLocked(ino)->listed_ns = store_.env().NowMonotonicNanos();
  return Status::Ok();
}

Attr SnapshotFs::VirtualAttrLocked(uint64_t ino) {
  const VNode* n = NodeLocked(ino);
  Attr a;
  a.ino = ino;
  a.uid = options_.uid;
  a.gid = options_.gid;
  a.mtime_ns = n->mtime_ns;
  switch (n->kind) {
    case VKind::kLatest:
      a.mode = S_IFLNK | 0777;
      a.size = n->link_target.size();
      a.stable = false;
      break;
    case VKind::kImage:
    case VKind::kBlob:
      a.mode = S_IFREG | 0444;
      a.size = n->archive.size;
      a.allocated = n->allocated;
      if (n->kind == VKind::kImage) a.blksize = 1u << 20;
      break;
    default:
      a.mode = kDirMode;
      a.nlink = 2;
      a.stable = n->kind == VKind::kSnapshot;
  }
  return a;
}

void SnapshotFs::ReportOnce(const std::string& key, const Status& s) {
  {
    MutexLock lock(mu_);
    if (!reported_.insert(key).second) return;
  }
  if (options_.logger != nullptr && s.code() != StatusCode::kDataLoss) {
    options_.logger->Warn("{}", s.message());  // a bad chunk is reported by the cache
  }
}

Result<std::shared_ptr<SnapshotFs::LoadedTree>> SnapshotFs::LoadTree(uint32_t tree_id) {
  Tree* t;
  {
    MutexLock lock(mu_);
    if (tree_id == 0 || tree_id > trees_.size()) return NotFoundError("no such tree");
    t = trees_[tree_id - 1].get();
    if (t->loaded) {
      t->last_use = ++tree_clock_;
      return t->loaded;
    }
  }
  MutexLock load(t->load_mu);
  {
    MutexLock lock(mu_);
    if (t->loaded) return t->loaded;
  }
  auto result = [&]() -> Result<std::shared_ptr<LoadedTree>> {
    CAIRN_ASSIGN_OR_RETURN(auto reader, chunkio::TreeArchiveReader::Open(
                                            store_, *options_.readers.source, t->snap, t->archive));
    auto loaded = std::make_shared<LoadedTree>();
    CAIRN_ASSIGN_OR_RETURN(loaded->view, access::TreeView::Load(*reader));
    access::StreamReaderOptions o;
    o.cache = options_.readers.cache;
    o.source = options_.readers.source;
    o.crypt = reader->crypt();
    o.description = access::DescribeArchive(t->snap, t->archive.name);
    o.readahead = options_.readers.readahead;
    loaded->payload = std::make_unique<access::StreamReader>(
        access::MapPayload(reader->data_index(), reader->crypt()), o);
    loaded->bytes = loaded->view->memory_bytes();
    return loaded;
  }();
  if (!result.ok()) {
    ReportOnce(t->snap.ToString() + "/" + t->archive.name, result.status());
    return result.status();
  }
  MutexLock lock(mu_);
  t->loaded = *result;
  t->last_use = ++tree_clock_;
  tree_bytes_ += t->loaded->bytes;
  ++trees_loaded_;
  // Drop the least recently used views beyond the budget (not this one).
  while (tree_bytes_ > options_.max_tree_bytes) {
    Tree* victim = nullptr;
    for (auto& other : trees_) {
      if (other.get() != t && other->loaded && (!victim || other->last_use < victim->last_use)) {
        victim = other.get();
      }
    }
    if (victim == nullptr) break;
    tree_bytes_ -= victim->loaded->bytes;
    victim->loaded.reset();  // files open in it keep it alive
  }
  return t->loaded;
}

Result<Attr> SnapshotFs::TreeAttr(uint32_t tree_id, uint32_t entry) {
  CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(tree_id));
  const access::TreeView& v = *tree->view;
  if (entry >= v.size()) return NotFoundError("no such entry");
  const access::TreeNode& n = v.node(entry);
  Attr a;
  a.ino = TreeIno(tree_id, v.Resolve(entry));
  a.mode = TypeBits(n.kind) | n.mode;
  a.nlink = n.nlink;
  a.uid = n.uid;
  a.gid = n.gid;
  a.size = n.kind == tree::EntryKind::kDirectory ? 0 : n.size;
  a.rdev = n.rdev;
  a.mtime_ns = n.mtime_ns;
  return a;
}

Result<Attr> SnapshotFs::TreeLookup(uint32_t tree_id, uint32_t dir, std::string_view name) {
  CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(tree_id));
  if (dir >= tree->view->size()) return NotFoundError("no such entry");
  if (tree->view->node(dir).kind != tree::EntryKind::kDirectory) return NotADirectory(name);
  auto child = tree->view->Find(dir, name);
  if (!child.has_value()) return NotFoundError(fmt::format("no entry {}", name));
  return TreeAttr(tree_id, *child);
}

Result<std::vector<DirEntry>> SnapshotFs::TreeReadDir(uint32_t tree_id, uint32_t dir) {
  CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(tree_id));
  const access::TreeView& v = *tree->view;
  if (dir >= v.size()) return NotFoundError("no such entry");
  if (v.node(dir).kind != tree::EntryKind::kDirectory) return NotADirectory("entry");
  std::vector<DirEntry> out;
  out.reserve(v.Children(dir).size());
  for (uint32_t c : v.Children(dir)) {
    CAIRN_ASSIGN_OR_RETURN(Attr a, TreeAttr(tree_id, c));
    out.push_back(DirEntry{std::string(v.name(c)), a});
  }
  return out;
}

Result<Attr> SnapshotFs::Lookup(uint64_t parent, std::string_view name) {
  if (IsTreeIno(parent)) {
    return TreeLookup(static_cast<uint32_t>(parent >> 32), static_cast<uint32_t>(parent), name);
  }
  uint64_t child = 0;
  uint32_t tree_id = 0;
  {
    MutexLock lock(mu_);
    VNode* n = NodeLocked(parent);
    if (n == nullptr) return NotFoundError("no such inode");
    if (n->kind == VKind::kTree) {
      tree_id = n->tree_id;
    } else if (n->kind == VKind::kLatest || n->kind == VKind::kImage || n->kind == VKind::kBlob) {
      return NotADirectory(name);
    } else {
      CAIRN_RETURN_IF_ERROR(RefreshLocked(parent, false));
      auto find = [&]() REQUIRES(mu_) {
        const VNode* p = NodeLocked(parent);
        auto it = p->children.find(name);
        return it == p->children.end() ? uint64_t{0} : it->second;
      };
      child = find();
      if (child == 0) {
        CAIRN_RETURN_IF_ERROR(RefreshLocked(parent, true));
        child = find();
      }
      if (child == 0) return NotFoundError(fmt::format("no entry {}", name));
      if (NodeLocked(child)->kind != VKind::kTree) return VirtualAttrLocked(child);
    }
  }
  if (tree_id != 0) return TreeLookup(tree_id, 0, name);
  return GetAttr(child);  // a tree archive: its root's metadata
}

Result<Attr> SnapshotFs::GetAttr(uint64_t ino) {
  if (IsTreeIno(ino)) return TreeAttr(static_cast<uint32_t>(ino >> 32), static_cast<uint32_t>(ino));
  uint32_t tree_id;
  {
    MutexLock lock(mu_);
    VNode* n = NodeLocked(ino);
    if (n == nullptr) return NotFoundError("no such inode");
    if (n->kind != VKind::kTree) return VirtualAttrLocked(ino);
    tree_id = n->tree_id;
  }
  CAIRN_ASSIGN_OR_RETURN(Attr a, TreeAttr(tree_id, 0));
  a.ino = ino;
  return a;
}

Result<std::vector<DirEntry>> SnapshotFs::ReadDir(uint64_t ino) {
  if (IsTreeIno(ino)) return TreeReadDir(static_cast<uint32_t>(ino >> 32), static_cast<uint32_t>(ino));
  std::vector<std::pair<std::string, uint64_t>> kids;
  std::vector<DirEntry> out;
  uint32_t tree_id = 0;
  {
    MutexLock lock(mu_);
    VNode* n = NodeLocked(ino);
    if (n == nullptr) return NotFoundError("no such inode");
    tree_id = n->kind == VKind::kTree ? n->tree_id : 0;
  }
  if (tree_id != 0) return TreeReadDir(tree_id, 0);
  {
    MutexLock lock(mu_);
    VNode* n = NodeLocked(ino);
    if (n->kind == VKind::kLatest || n->kind == VKind::kImage || n->kind == VKind::kBlob) {
      return NotADirectory("file");
    }
    CAIRN_RETURN_IF_ERROR(RefreshLocked(ino, false));
    for (const auto& [name, child] : NodeLocked(ino)->children) {
      if (NodeLocked(child)->kind == VKind::kTree) {
        kids.emplace_back(name, child);  // its attributes need its view: outside the lock
      } else {
        out.push_back(DirEntry{name, VirtualAttrLocked(child)});
      }
    }
  }
  for (auto& [name, child] : kids) {
    auto a = GetAttr(child);
    if (!a.ok()) {
      // An archive that cannot be read (no key, damage) is still listed.
      MutexLock lock(mu_);
      Attr v = VirtualAttrLocked(child);
      out.push_back(DirEntry{name, v});
      continue;
    }
    out.push_back(DirEntry{name, *a});
  }
  std::sort(out.begin(), out.end(), [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

Result<std::string> SnapshotFs::ReadLink(uint64_t ino) {
  if (IsTreeIno(ino)) {
    CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(static_cast<uint32_t>(ino >> 32)));
    const uint32_t entry = static_cast<uint32_t>(ino);
    if (entry >= tree->view->size() || tree->view->node(entry).kind != tree::EntryKind::kSymlink) {
      return InvalidArgumentError("not a symlink");
    }
    return tree->view->LinkTarget(entry);
  }
  MutexLock lock(mu_);
  VNode* n = NodeLocked(ino);
  if (n == nullptr) return NotFoundError("no such inode");
  if (n->kind != VKind::kLatest) return InvalidArgumentError("not a symlink");
  CAIRN_RETURN_IF_ERROR(RefreshLocked(n->parent, false));
  return NodeLocked(ino)->link_target;
}

Result<std::vector<std::string>> SnapshotFs::ListXattr(uint64_t ino) {
  std::vector<std::string> names;
  if (!IsTreeIno(ino)) return names;  // what cairn makes up has none; a tree's root neither
  CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(static_cast<uint32_t>(ino >> 32)));
  const uint32_t entry = static_cast<uint32_t>(ino);
  if (entry >= tree->view->size()) return NotFoundError("no such entry");
  for (const auto& x : tree->view->Xattrs(entry)) names.push_back(x.name);
  return names;
}

Result<std::string> SnapshotFs::GetXattr(uint64_t ino, std::string_view name) {
  if (IsTreeIno(ino)) {
    CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(static_cast<uint32_t>(ino >> 32)));
    const uint32_t entry = static_cast<uint32_t>(ino);
    if (entry >= tree->view->size()) return NotFoundError("no such entry");
    for (const auto& x : tree->view->Xattrs(entry)) {
      if (x.name == name) return x.value;
    }
  }
  return NotFoundError(fmt::format("no xattr {}", name));
}

Result<std::unique_ptr<SnapshotFs::SnapshotPin>> SnapshotFs::Pin(const datastore::SnapshotRef& snap) {
  std::string key = snap.RelDir();
  MutexLock lock(mu_);
  PinState& p = pins_[key];
  if (p.count == 0) {
    auto held = store_.LockSnapshotShared(snap);
    if (!held.ok()) {
      pins_.erase(key);
      return held.status();
    }
    p.lock = std::move(*held);
  }
  ++p.count;
  ++open_files_;
  // Built in place: a temporary pin would unpin (and take mu_) when destroyed.
  return std::unique_ptr<SnapshotPin>(new SnapshotPin{this, std::move(key)});
}

void SnapshotFs::Unpin(const std::string& key) {
  MutexLock lock(mu_);
  --open_files_;
  auto it = pins_.find(key);
  if (it != pins_.end() && --it->second.count == 0) pins_.erase(it);
}

Result<std::unique_ptr<SnapshotFs::File>> SnapshotFs::OpenFile(uint64_t ino) {
  if (IsTreeIno(ino)) {
    const uint32_t tree_id = static_cast<uint32_t>(ino >> 32);
    CAIRN_ASSIGN_OR_RETURN(auto tree, LoadTree(tree_id));
    const uint32_t entry = static_cast<uint32_t>(ino);
    if (entry >= tree->view->size()) return NotFoundError("no such entry");
    const access::TreeNode& n = tree->view->node(entry);
    if (n.kind != tree::EntryKind::kFile) return InvalidArgumentError("not a regular file");
    datastore::SnapshotRef snap;
    {
      MutexLock lock(mu_);
      snap = trees_[tree_id - 1]->snap;
    }
    CAIRN_ASSIGN_OR_RETURN(auto pin, Pin(snap));
    return std::unique_ptr<File>(
        new ArchiveFile(nullptr, tree, n.payload_offset, n.size, std::move(pin)));
  }
  VNode node;
  {
    MutexLock lock(mu_);
    VNode* n = NodeLocked(ino);
    if (n == nullptr) return NotFoundError("no such inode");
    if (n->kind != VKind::kImage && n->kind != VKind::kBlob) {
      return InvalidArgumentError("not a regular file");
    }
    node.kind = n->kind;
    node.snap = n->snap;
    node.archive = n->archive;
  }
  CAIRN_ASSIGN_OR_RETURN(auto pin, Pin(node.snap));
  const std::string report_key = node.snap.ToString() + "/" + node.archive.name;
  if (node.kind == VKind::kBlob) {
    auto data = [&]() -> Result<Bytes> {
      CAIRN_ASSIGN_OR_RETURN(index::Manifest m, store_.ReadManifest(node.snap));
      CAIRN_ASSIGN_OR_RETURN(const crypto::CryptConfig* crypt, store_.CryptFor(m));
      return store_.ReadBlobArchive(node.snap, node.archive, crypt);
    }();
    if (!data.ok()) {
      ReportOnce(report_key, data.status());
      return data.status();
    }
    return std::unique_ptr<File>(new BlobFile(std::move(*data), std::move(pin)));
  }
  std::shared_ptr<access::StreamReader> reader;
  {
    MutexLock lock(mu_);
    if (auto it = images_.find(ino); it != images_.end()) reader = it->second;
  }
  if (!reader) {
    auto opened = access::OpenImageReader(store_, node.snap, node.archive, options_.readers);
    if (!opened.ok()) {
      ReportOnce(report_key, opened.status());
      return opened.status();
    }
    MutexLock lock(mu_);
    auto [it, fresh] = images_.emplace(ino, std::move(*opened));
    reader = it->second;
  }
  return std::unique_ptr<File>(new ArchiveFile(reader, nullptr, 0, node.archive.size, std::move(pin)));
}

SnapshotFsStats SnapshotFs::stats() const {
  MutexLock lock(mu_);
  return SnapshotFsStats{trees_loaded_, tree_bytes_, open_files_};
}

}  // namespace cairn::mount
