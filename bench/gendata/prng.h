// Deterministic pseudo-random numbers for the benchmark data generator.
//
// xoshiro256** (Blackman & Vigna) seeded through splitmix64: a few cycles
// per 64-bit word, so filling "random" regions costs far less than writing
// them. Every derived draw (bounded integers, doubles, normals) is computed
// here from the raw words, never through <random>'s distributions, whose
// output differs between standard libraries: a seed names the same data set
// with any compiler on any x86-64 or arm64 Linux.
//
// Thread safety: none; one generator per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <span>
#include <vector>

#include "base/splitmix64.h"

namespace cairn::bench {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t sm = seed;
    for (auto& word : s_) word = SplitMix64Next(sm);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. Lemire's multiply-shift (bias < n / 2^64).
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  // Uniform in [lo, hi], both included.
  int64_t Between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
  }
  // Uniform in [0, 1), 53 bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Standard normal (Box–Muller; the second value is dropped for simplicity).
  double Normal() {
    double u1 = 1.0 - Uniform();  // (0, 1]
    double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double LogNormal(double mu, double sigma) { return std::exp(mu + sigma * Normal()); }

  // Fills `out` with random bytes, eight at a time.
  void Fill(std::span<uint8_t> out) {
    uint8_t* p = out.data();
    size_t n = out.size();
    while (n >= 8) {
      uint64_t w = Next();
      std::memcpy(p, &w, 8);
      p += 8;
      n -= 8;
    }
    if (n > 0) {
      uint64_t w = Next();
      std::memcpy(p, &w, n);
    }
  }

  // Index drawn with probability proportional to weights[i] (all >= 0, not all 0).
  size_t Pick(std::span<const double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;  // rounding at the top end
  }

  // Index drawn from cumulative weights (ascending, last = total): binary search.
  size_t PickCumulative(const std::vector<double>& cumulative) {
    double x = Uniform() * cumulative.back();
    size_t lo = 0;
    size_t hi = cumulative.size() - 1;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (cumulative[mid] <= x) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace cairn::bench
