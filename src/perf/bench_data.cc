// cairn benchmark's data set (machine_bench.h): a deterministic image-like
// stream, cut into chunks and encoded as backup stores them.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "base/splitmix64.h"
#include "blob/blob.h"
#include "perf/machine_bench.h"

namespace cairn::perf {
namespace {

// --- the data ---------------------------------------------------------------

// xoshiro256** seeded through splitmix64, as bench/gendata/prng.h (src/ may
// not include bench/): every draw is computed from the raw words, never
// through <random>'s distributions, so a seed names the same bytes with any
// standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : s_) word = SplitMix64Next(seed);
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
  uint64_t Below(uint64_t n) {  // [0, n), n > 0
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * n) >> 64);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  void Fill(MutableByteSpan out) {
    size_t i = 0;
    for (; i + 8 <= out.size(); i += 8) {
      uint64_t w = Next();
      std::memcpy(out.data() + i, &w, 8);
    }
    if (i < out.size()) {
      uint64_t w = Next();
      std::memcpy(out.data() + i, &w, out.size() - i);
    }
  }
  // Index drawn with probability proportional to weights[i].
  size_t Pick(std::span<const double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// Text-like bytes, the model of bench/gendata/text_pool.h made smaller: a
// vocabulary of pseudo-words drawn with English letter frequencies, used
// with Zipf-like word frequencies, in log, code and prose lines; text is a
// random choice of pool lines, so it compresses like text (zstd -1: about
// 2.5-3×) without repeating at chunk scale.
class TextLines {
 public:
  explicit TextLines(uint64_t seed) {
    Rng rng(seed);
    constexpr std::string_view kLetters = "etaoinshrdlcumwfgypbvkjxqz";
    constexpr std::array<double, 26> kLetterWeights = {
        12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3,  4.0,  2.8, 2.8,
        2.4,  2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.15, 0.15, 0.1, 0.07};
    std::set<std::string> unique;
    while (unique.size() < 3000) {
      std::string w(1 + rng.Below(10), ' ');
      for (char& c : w) c = kLetters[rng.Pick(kLetterWeights)];
      unique.insert(std::move(w));
    }
    std::vector<std::string> words(unique.begin(), unique.end());
    for (size_t i = words.size(); i > 1; --i) std::swap(words[i - 1], words[rng.Below(i)]);
    std::vector<double> cumulative;
    double acc = 0;
    for (size_t i = 0; i < words.size(); ++i) {
      acc += 1.0 / std::pow(static_cast<double>(i + 1), 1.05);
      cumulative.push_back(acc);
    }
    auto word = [&]() -> const std::string& {
      double x = rng.Uniform() * acc;
      size_t k = std::upper_bound(cumulative.begin(), cumulative.end(), x) - cumulative.begin();
      return words[std::min(k, words.size() - 1)];
    };
    constexpr std::array<std::string_view, 4> kLevels = {"INFO", "INFO", "WARN", "DEBUG"};
    for (int i = 0; i < 20000; ++i) {
      std::string line;
      double style = rng.Uniform();
      int n = 3 + static_cast<int>(rng.Below(13));
      if (style < 0.25) {  // log line
        line = fmt::format("2024-{:02}-{:02} {:02}:{:02}:{:02}.{:03} {} [{}]", 1 + rng.Below(12),
                           1 + rng.Below(28), rng.Below(24), rng.Below(60), rng.Below(60),
                           rng.Below(1000), kLevels[rng.Below(kLevels.size())], word());
        for (int k = 1; k < n; ++k) line += " " + word();
      } else if (style < 0.45) {  // code line
        line = fmt::format("{}{}({}, {}, {});", std::string(4 * rng.Below(5), ' '), word(), word(),
                           word(), rng.Below(100000));
      } else {  // prose line
        for (int k = 0; k < n; ++k) line += (k == 0 ? "" : k % 5 == 4 ? ", " : " ") + word();
        line[0] = static_cast<char>(line[0] - 'a' + 'A');
        line += ".";
      }
      starts_.push_back(static_cast<uint32_t>(text_.size()));
      text_ += line + "\n";
    }
    starts_.push_back(static_cast<uint32_t>(text_.size()));
  }

  void Fill(Rng& rng, MutableByteSpan out) const {
    for (size_t pos = 0; pos < out.size();) {
      size_t i = rng.Below(starts_.size() - 1);
      size_t len = std::min<size_t>(starts_[i + 1] - starts_[i], out.size() - pos);
      std::memcpy(out.data() + pos, text_.data() + starts_[i], len);
      pos += len;
    }
  }

 private:
  std::string text_;
  std::vector<uint32_t> starts_;
};

constexpr uint64_t kPage = 4096;
enum Kind { kZero = 0, kRandom = 1, kText = 2, kDup = 3 };
constexpr std::array<double, 4> kTargetMix = {0.35, 0.25, 0.30, 0.10};

}  // namespace

Bytes GenerateImageStream(uint64_t seed, uint64_t size, DataMix* mix) {
  struct Region {
    uint64_t offset, length;
  };
  Bytes out(size, 0);
  Rng rng(seed);
  TextLines text(seed * 7919 + 17);
  std::vector<Region> sources;  // random and text regions, for duplicates
  std::array<uint64_t, 4> written{};
  for (uint64_t off = 0; off < size;) {
    uint64_t pages = static_cast<uint64_t>(std::exp2(rng.Uniform() * 11));  // 1 .. 2047
    uint64_t rsize = std::min(pages * kPage, size - off);
    // Weight: the kind's deficit against the target mix, plus some chance
    // for every kind so kinds interleave.
    std::array<double, 4> w{};
    for (size_t k = 0; k < w.size(); ++k) {
      double deficit =
          kTargetMix[k] * static_cast<double>(off + rsize) - static_cast<double>(written[k]);
      w[k] = std::max(0.0, deficit) + kTargetMix[k] * static_cast<double>(rsize) * 0.25;
    }
    if (sources.empty()) w[kDup] = 0;
    auto kind = static_cast<Kind>(rng.Pick(w));
    MutableByteSpan region(out.data() + off, rsize);
    switch (kind) {
      case kZero:
        break;  // already zero
      case kRandom:
        rng.Fill(region);
        sources.push_back({off, rsize});
        break;
      case kText:
        text.Fill(rng, region);
        sources.push_back({off, rsize});
        break;
      case kDup: {  // a 4 KiB-aligned piece of an earlier region
        const Region& src = sources[rng.Below(sources.size())];
        rsize = std::min(rsize, src.length);
        uint64_t start = src.offset + rng.Below((src.length - rsize) / kPage + 1) * kPage;
        std::memcpy(out.data() + off, out.data() + start, rsize);
        break;
      }
    }
    written[kind] += rsize;
    off += rsize;
  }
  if (mix != nullptr)
    *mix = DataMix{written[kZero], written[kRandom], written[kText], written[kDup]};
  return out;
}

Result<BenchData> MakeBenchData(uint64_t seed, uint64_t stream_bytes) {
  BenchData data;
  data.seed = seed;
  data.stream_bytes = stream_bytes;
  Bytes stream = GenerateImageStream(seed, stream_bytes, &data.mix);
  for (uint64_t off = 0; off < stream.size(); off += kBenchChunkSize) {
    ByteSpan chunk =
        ByteSpan(stream).subspan(off, std::min<uint64_t>(kBenchChunkSize, stream.size() - off));
    if (IsAllZero(chunk)) {
      ++data.zero_chunks;
      continue;
    }
    data.chunks.emplace_back(chunk.begin(), chunk.end());
    data.ids.push_back(crypto::Sha256(chunk));
    CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(chunk));
    data.plain_bytes += chunk.size();
    data.stored_bytes += stored.size();
    data.stored.push_back(std::move(stored));
  }
  // A fixed key: the same bytes cost the same under any key.
  crypto::Key256 master;
  Rng(0x6165732d6b6579).Fill(master);
  data.crypt = crypto::CryptConfig::FromMasterKey(master);
  for (const Bytes& chunk : data.chunks) {
    data.enc_ids.push_back(data.crypt->ChunkId(chunk));
    CAIRN_ASSIGN_OR_RETURN(Bytes stored, blob::Encode(chunk, {.crypt = data.crypt.get()}));
    data.enc_stored_bytes += stored.size();
    data.enc_stored.push_back(std::move(stored));
  }
  if (data.chunks.empty()) {
    return FailedPreconditionError(
        fmt::format("a benchmark stream of {} bytes (seed {}) holds no chunk that is not all zeros",
                    stream_bytes, seed));
  }
  return data;
}

}  // namespace cairn::perf
