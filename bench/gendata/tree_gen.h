// A synthetic file tree, reproducible from a seed (for tree-archive benchmarks).
//
// Nested directories (depth <= 8, about one per 20 files); file sizes
// log-normal (median ~4 KiB, sigma 2.5) scaled so they sum to ~`size`,
// clamped at 64 MiB, ~1% empty or tiny; contents text (50%), random (33%),
// zero (3%), mixed 64 KiB runs (4%) or a copy of an earlier file (10%);
// ~2% symlinks (to files, to directories, a few dangling); fixed mtimes on
// files, symlinks and directories. The same model as
// ../shared/data/gen_dataset.py's `tree`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace cairn::bench {

struct TreeOptions {
  std::string path;  // removed first if it exists
  int files = 20000;
  uint64_t size = uint64_t{1} << 30;
  uint64_t seed = 2;
};

// Writes the tree and returns its manifest (files and bytes per kind).
Result<nlohmann::ordered_json> GenerateTree(const TreeOptions& options);

}  // namespace cairn::bench
