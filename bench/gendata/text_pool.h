// Compressible, text- and log-like bytes for benchmark data sets.
//
// The same model as ../shared/data/gen_dataset.py's TextSource: a vocabulary
// of pseudo-words drawn with English letter frequencies and used with
// Zipf-like word frequencies; a pool of ~120k lines built once from it (log
// lines, code lines, prose lines); text of any length is a random choice of
// pool lines. Regions larger than a few KiB therefore never repeat (no
// accidental chunk-level dedup), yet compress like text (~2.5-3x with zstd).
//
// Thread safety: Fill() is const and may run concurrently, each caller with
// its own Rng.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gendata/prng.h"

namespace cairn::bench {

class TextPool {
 public:
  // Builds the pool deterministically from `seed` (~100 ms).
  explicit TextPool(uint64_t seed, int words = 6000, int lines = 120000);

  // Fills `out` with whole pool lines chosen by `rng`, the last one cut short.
  void Fill(Rng& rng, std::span<uint8_t> out) const;

  double average_line_length() const;

 private:
  std::string text_;              // all lines, back to back
  std::vector<uint32_t> starts_;  // line i = text_[starts_[i], starts_[i + 1])
};

}  // namespace cairn::bench
