// A synthetic VM disk image, reproducible from a seed.
//
// The image is a sequence of 4 KiB-aligned regions with log-uniform sizes
// between 4 KiB and 8 MiB. Each region's kind is drawn by its deficit against
// the target byte mix (35% zeros, 25% random, 30% text-like, 10% duplicates of
// earlier random/text regions), with randomness for interleaving: the same
// algorithm as ../shared/data/gen_dataset.py, with a faster generator.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace cairn::bench {

struct ImageOptions {
  std::string path;
  uint64_t size = uint64_t{2} << 30;
  uint64_t seed = 1;
  bool sparse = false;  // leave zero regions as holes
};

// Writes the image and returns its manifest (byte counts per kind).
Result<nlohmann::ordered_json> GenerateImage(const ImageOptions& options);

}  // namespace cairn::bench
