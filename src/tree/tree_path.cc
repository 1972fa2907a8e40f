#include "tree/tree_path.h"

namespace cairn::tree {

std::string NormalizeTreePath(std::string_view p) {
  while (p.starts_with("./")) p.remove_prefix(2);
  while (p.starts_with('/')) p.remove_prefix(1);
  while (p.ends_with('/')) p.remove_suffix(1);
  if (p == ".") p = "";
  return std::string(p);
}

const char* EntryKindWord(EntryKind kind) {
  switch (kind) {
    case EntryKind::kDirectory: return "dir";
    case EntryKind::kFile: return "file";
    case EntryKind::kSymlink: return "symlink";
    case EntryKind::kHardlink: return "hardlink";
    case EntryKind::kCharDevice: return "chardev";
    case EntryKind::kBlockDevice: return "blockdev";
    case EntryKind::kFifo: return "fifo";
  }
  return "unknown";
}

}  // namespace cairn::tree
