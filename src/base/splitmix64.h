// splitmix64 (Steele, Lea, Flood; Vigna's constants): one copy for every
// place that needs a cheap, well-mixed 64-bit value from a counter or a
// seed — the chunker's gear table (part of the format: see index/chunker.cc),
// seeding xoshiro256**, hashing keys, and deterministic fault injection.
// Not for anything secret.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

namespace cairn {

inline constexpr uint64_t kSplitMix64Gamma = 0x9e3779b97f4a7c15ULL;

// The finalizer: every input bit reaches every output bit.
constexpr uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The generator: advances `state` by the golden gamma and mixes it.
constexpr uint64_t SplitMix64Next(uint64_t& state) { return SplitMix64Mix(state += kSplitMix64Gamma); }

}  // namespace cairn
