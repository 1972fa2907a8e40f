#include "access/tree_view.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

namespace cairn::access {
namespace {

const std::string kEmpty;
const std::vector<tree::Xattr> kNoXattrs;

size_t DepthOf(std::string_view path) {
  return path.empty() ? 0 : 1 + static_cast<size_t>(std::count(path.begin(), path.end(), '/'));
}

}  // namespace

Result<std::unique_ptr<TreeView>> TreeView::Load(chunkio::TreeArchiveReader& reader) {
  auto view = std::unique_ptr<TreeView>(new TreeView());
  reader.Restart();
  std::vector<uint32_t> open_dirs;  // by depth
  std::unordered_map<std::string, uint32_t> linked;  // path of a linked file -> number
  std::vector<std::pair<uint32_t, uint32_t>> hardlinks;  // (entry, file)
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<tree::Entry> e, reader.Next());
    if (!e.has_value()) break;
    if (view->nodes_.size() >= UINT32_MAX - 1) {
      return ResourceExhaustedError(fmt::format("{}: more entries than a mount can number",
                                                reader.description()));
    }
    const uint32_t i = static_cast<uint32_t>(view->nodes_.size());
    const size_t depth = DepthOf(e->path);
    TreeNode n;
    n.kind = e->kind;
    n.mode = e->mode;
    n.uid = e->uid;
    n.gid = e->gid;
    n.mtime_ns = e->mtime_ns;
    n.size = e->kind == tree::EntryKind::kSymlink ? e->link_target.size() : e->size;
    n.payload_offset = e->payload_offset;
    n.rdev = e->rdev;
    n.nlink = e->kind == tree::EntryKind::kDirectory ? 2 : 1;
    n.name_offset = static_cast<uint32_t>(view->names_.size());
    n.name_length = static_cast<uint32_t>(e->name.size());
    view->names_ += e->name;
    if (depth > 0) {
      n.parent = open_dirs[depth - 1];
      if (e->kind == tree::EntryKind::kDirectory) ++view->nodes_[n.parent].nlink;
    }
    if (e->kind == tree::EntryKind::kSymlink || !e->xattrs.empty()) {
      n.extra = static_cast<uint32_t>(view->extras_.size());
      view->extras_.push_back(Extra{e->kind == tree::EntryKind::kSymlink ? e->link_target : "",
                                    std::move(e->xattrs)});
    }
    if (e->kind == tree::EntryKind::kDirectory) {
      open_dirs.resize(depth + 1);
      open_dirs[depth] = i;
    }
    if (e->kind == tree::EntryKind::kFile && e->linked) linked.emplace(e->path, i);
    if (e->kind == tree::EntryKind::kHardlink) {
      // The decoder checked that the target is an earlier linked file.
      auto it = linked.find(e->link_target);
      if (it == linked.end()) {
        return DataLossError(fmt::format("{}: hardlink {} to {}, which is not a linked file",
                                         reader.description(), e->path, e->link_target));
      }
      hardlinks.emplace_back(i, it->second);
    }
    view->nodes_.push_back(std::move(n));
  }
  if (view->nodes_.empty()) return DataLossError(fmt::format("{}: no root", reader.description()));
  // resolved_: hardlinks to their files, whose link counts grow.
  view->resolved_.resize(view->nodes_.size());
  for (uint32_t i = 0; i < view->nodes_.size(); ++i) view->resolved_[i] = i;
  for (auto [entry, file] : hardlinks) {
    view->resolved_[entry] = file;
    ++view->nodes_[file].nlink;
  }
  // children_: each directory's children together, in stream (name) order.
  std::vector<uint32_t> counts(view->nodes_.size(), 0);
  for (uint32_t i = 1; i < view->nodes_.size(); ++i) ++counts[view->nodes_[i].parent];
  uint32_t at = 0;
  for (uint32_t i = 0; i < view->nodes_.size(); ++i) {
    view->nodes_[i].first_child = at;
    at += counts[i];
  }
  view->children_.resize(at);
  for (uint32_t i = 1; i < view->nodes_.size(); ++i) {
    TreeNode& p = view->nodes_[view->nodes_[i].parent];
    view->children_[p.first_child + p.child_count++] = i;
  }
  view->names_.shrink_to_fit();
  return view;
}

std::string_view TreeView::name(uint32_t i) const {
  const TreeNode& n = nodes_[i];
  return std::string_view(names_).substr(n.name_offset, n.name_length);
}

std::span<const uint32_t> TreeView::Children(uint32_t dir) const {
  const TreeNode& n = nodes_[dir];
  return std::span<const uint32_t>(children_).subspan(n.first_child, n.child_count);
}

std::optional<uint32_t> TreeView::Find(uint32_t dir, std::string_view want) const {
  if (nodes_[dir].kind != tree::EntryKind::kDirectory) return std::nullopt;
  auto kids = Children(dir);
  // Names are in byte order (memcmp, shorter prefix first): string_view's <.
  auto it = std::lower_bound(kids.begin(), kids.end(), want,
                             [&](uint32_t c, std::string_view w) { return name(c) < w; });
  if (it == kids.end() || name(*it) != want) return std::nullopt;
  return *it;
}

const std::string& TreeView::LinkTarget(uint32_t i) const {
  const TreeNode& n = nodes_[i];
  return n.extra == TreeNode::kNoExtra ? kEmpty : extras_[n.extra].link_target;
}

const std::vector<tree::Xattr>& TreeView::Xattrs(uint32_t i) const {
  const TreeNode& n = nodes_[resolved_[i]];
  return n.extra == TreeNode::kNoExtra ? kNoXattrs : extras_[n.extra].xattrs;
}

uint64_t TreeView::memory_bytes() const {
  uint64_t b = nodes_.capacity() * sizeof(TreeNode) + resolved_.capacity() * 4 +
               children_.capacity() * 4 + names_.capacity() + extras_.capacity() * sizeof(Extra);
  for (const Extra& x : extras_) {
    b += x.link_target.capacity();
    for (const auto& a : x.xattrs) b += a.name.capacity() + a.value.capacity() + sizeof(a);
  }
  return b;
}

}  // namespace cairn::access
