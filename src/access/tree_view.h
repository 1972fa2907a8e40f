// TreeView: a tree archive's metadata in memory, for `cairn mount`: every
// entry with what stat, readdir, readlink and getxattr need, children of a
// directory found by binary search on their names. Built by reading the
// metadata stream once (TreeArchiveReader), so listings and stat never touch
// the payload; file contents are read through a StreamReader over the
// payload stream at the entry's payload_offset.
//
// Entries are numbered in stream order (the root is 0), so a view loaded
// again has the same numbers: the mount's inode numbers stay valid when a
// view is dropped and loaded again. A hardlink entry resolves to its file
// (same number); a file's link count is 1 plus its hardlinks, a directory's
// 2 plus its subdirectories.
//
// Memory: about 90 bytes per entry plus its name (and a symlink target or
// xattrs where there are any): ~2 MiB for 20 000 files.
//
// Thread safety: const after Load; any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chunkio/tree_reader.h"
#include "tree/tree_format.h"

namespace cairn::access {

struct TreeNode {
  tree::EntryKind kind = tree::EntryKind::kFile;  // never kHardlink: resolved
  uint32_t mode = 0;  // permission bits (07777)
  uint32_t uid = 0;
  uint32_t gid = 0;
  uint32_t nlink = 1;
  uint32_t parent = 0;
  uint32_t first_child = 0;  // into the children array (directories)
  uint32_t child_count = 0;
  uint32_t name_offset = 0;  // into the name arena
  uint32_t name_length = 0;
  uint32_t extra = kNoExtra;  // symlink target and xattrs, when there are any
  int64_t mtime_ns = 0;
  uint64_t size = 0;            // files: bytes; symlinks: target length
  uint64_t payload_offset = 0;  // files
  uint64_t rdev = 0;            // devices
  static constexpr uint32_t kNoExtra = UINT32_MAX;
};

class TreeView {
 public:
  // Reads the whole metadata stream from its start. DataLoss on a damaged
  // metadata chunk or stream; ResourceExhausted past 2^32 - 1 entries.
  static Result<std::unique_ptr<TreeView>> Load(chunkio::TreeArchiveReader& reader);

  uint32_t size() const { return static_cast<uint32_t>(nodes_.size()); }
  // Entry `i`; a hardlink's number gives its file. REQUIRES: i < size().
  const TreeNode& node(uint32_t i) const { return nodes_[resolved_[i]]; }
  // The number stat reports for entry `i`: its file's, for a hardlink.
  uint32_t Resolve(uint32_t i) const { return resolved_[i]; }
  std::string_view name(uint32_t i) const;
  // The directory's children, in name order (hardlinks as themselves).
  std::span<const uint32_t> Children(uint32_t dir) const;
  // The child of `dir` named `name`.
  std::optional<uint32_t> Find(uint32_t dir, std::string_view name) const;
  const std::string& LinkTarget(uint32_t i) const;
  const std::vector<tree::Xattr>& Xattrs(uint32_t i) const;
  uint64_t memory_bytes() const;

 private:
  struct Extra {
    std::string link_target;
    std::vector<tree::Xattr> xattrs;
  };
  std::vector<TreeNode> nodes_;
  std::vector<uint32_t> resolved_;  // hardlink entry -> its file; others -> themselves
  std::vector<uint32_t> children_;
  std::string names_;
  std::vector<Extra> extras_;
};

}  // namespace cairn::access
