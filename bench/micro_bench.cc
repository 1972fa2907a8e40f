// cairn-micro-bench: Google Benchmark micro-benchmarks of the per-byte hot
// loops, so a change to them can be measured on its own:
//   BM_Chunker  content-defined chunking (FastCDC, default parameters: the
//               first 512 KiB of each ~2.3 MiB chunk are skipped, not hashed)
//   BM_ChunkerHashAll  the same loop with almost nothing skipped (min 64 B,
//               avg 8 MiB): the speed of the gear hash itself
//   BM_Sha256   SHA-256 (OpenSSL), the other pass every stored byte takes
//   BM_Crc32c   CRC32C of stored blobs (ISA-L's crc32_iscsi), over 4 KiB and
//               4 MiB pieces (a small blob, a chunk); BM_Crc32cPortable the
//               slicing-by-8 reference. (Commit 3c0779a compared ISA-L with
//               the SSE4.2 three-chain loop cairn had: BM_Crc32cIsal.)
// All run over the same 64 MiB of pseudo-random data and report bytes/s.
//
//   cairn-micro-bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

#include "base/bytes.h"
#include "crypto/sha256.h"
#include "format/crc32c.h"
#include "index/chunker.h"

namespace {

constexpr size_t kDataSize = size_t{64} << 20;

const cairn::Bytes& RandomData() {
  static const cairn::Bytes data = [] {
    std::mt19937_64 rng(42);
    cairn::Bytes out(kDataSize);
    for (size_t i = 0; i < out.size(); i += 8) {
      uint64_t w = rng();
      for (int k = 0; k < 8; ++k) out[i + k] = static_cast<uint8_t>(w >> (8 * k));
    }
    return out;
  }();
  return data;
}

void RunChunker(benchmark::State& state, const cairn::index::ChunkerParams& params) {
  const cairn::Bytes& data = RandomData();
  size_t chunks = 0;
  for (auto _ : state) {
    cairn::index::Chunker chunker(params);
    cairn::ByteSpan rest(data);
    while (size_t cut = chunker.FindCut(rest)) {
      rest = rest.subspan(cut);
      ++chunks;
    }
    benchmark::DoNotOptimize(chunks);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
  state.counters["chunks"] =
      benchmark::Counter(static_cast<double>(chunks) / static_cast<double>(state.iterations()));
}

void BM_Chunker(benchmark::State& state) { RunChunker(state, {}); }
BENCHMARK(BM_Chunker)->Unit(benchmark::kMillisecond);

void BM_ChunkerHashAll(benchmark::State& state) {
  RunChunker(state, {.min_size = 64, .avg_size = 8u << 20, .max_size = 16u << 20});
}
BENCHMARK(BM_ChunkerHashAll)->Unit(benchmark::kMillisecond);

void BM_Sha256(benchmark::State& state) {
  const cairn::Bytes& data = RandomData();
  for (auto _ : state) {
    cairn::crypto::Digest d = cairn::crypto::Sha256(data);
    benchmark::DoNotOptimize(d);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * data.size()));
}
BENCHMARK(BM_Sha256)->Unit(benchmark::kMillisecond);

// CRC32C of every `state.range(0)`-byte piece of the data, by `crc`.
template <typename Crc>
void RunCrc32c(benchmark::State& state, Crc crc) {
  const cairn::Bytes& data = RandomData();
  const size_t piece = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    for (size_t off = 0; off + piece <= data.size(); off += piece) {
      uint32_t c = crc(cairn::ByteSpan(data).subspan(off, piece));
      benchmark::DoNotOptimize(c);
    }
  }
  state.SetBytesProcessed(
      static_cast<int64_t>(state.iterations() * (data.size() / piece * piece)));
}

void BM_Crc32c(benchmark::State& state) {
  RunCrc32c(state, [](cairn::ByteSpan b) { return cairn::format::Crc32c(b); });
}
BENCHMARK(BM_Crc32c)->Arg(4 << 10)->Arg(4 << 20)->Unit(benchmark::kMillisecond);

// The slicing-by-8 table the tests check the fast path against.
void BM_Crc32cPortable(benchmark::State& state) {
  RunCrc32c(state, [](cairn::ByteSpan b) { return cairn::format::Crc32cExtendPortable(0, b); });
}
BENCHMARK(BM_Crc32cPortable)->Arg(4 << 10)->Arg(4 << 20)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
