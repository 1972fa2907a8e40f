// How users name entries of a tree archive: the paths `cairn ls`/`cat` and
// the dashboard's tree browser accept, and the words for entry kinds they
// print. Shared so the CLI and the server read a path the same way.
#pragma once

#include <string>
#include <string_view>

#include "tree/tree_format.h"

namespace cairn::tree {

// "/etc/", "./etc" and "etc" all name "etc"; "", "/" and "." the root ("").
std::string NormalizeTreePath(std::string_view p);

// "dir", "file", "symlink", "hardlink", "chardev", "blockdev", "fifo".
const char* EntryKindWord(EntryKind kind);

}  // namespace cairn::tree
