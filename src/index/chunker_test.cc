#include "index/chunker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "crypto/sha256.h"
#include "tests/unit_test_util.h"

namespace cairn::index {
namespace {

constexpr size_t kBig = size_t{64} << 20;  // 64 MiB: ~28 chunks of the default sizes

// Small sizes, so that short streams hold many chunks.
constexpr ChunkerParams kSmall = {.min_size = 1024, .avg_size = 4096, .max_size = 16384};

// Feeds `data` to `chunker` in pieces whose sizes `next_piece` gives (0 is a
// valid size) and returns the chunk lengths; the last one is the unfinished
// tail, if there is one.
std::vector<uint64_t> ChunkLengths(Chunker& chunker, ByteSpan data,
                                   const std::function<size_t()>& next_piece) {
  std::vector<uint64_t> lengths;
  uint64_t chunk_start = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    ByteSpan piece = data.subspan(pos, std::min(next_piece(), data.size() - pos));
    while (true) {
      size_t cut = chunker.FindCut(piece);
      if (cut == 0) break;
      EXPECT_LE(cut, piece.size());
      lengths.push_back(pos + cut - chunk_start);
      chunk_start = pos + cut;
      pos += cut;
      piece = piece.subspan(cut);
    }
    EXPECT_EQ(chunker.pending(), pos + piece.size() - chunk_start);
    pos += piece.size();
  }
  if (chunk_start < data.size()) lengths.push_back(data.size() - chunk_start);
  return lengths;
}

std::vector<uint64_t> ChunkLengths(const ChunkerParams& params, ByteSpan data) {
  Chunker chunker(params);
  return ChunkLengths(chunker, data, [&] { return data.size(); });
}

std::vector<crypto::Digest> ChunkDigests(const ChunkerParams& params, ByteSpan data) {
  std::vector<crypto::Digest> digests;
  uint64_t start = 0;
  for (uint64_t len : ChunkLengths(params, data)) {
    digests.push_back(crypto::Sha256(data.subspan(start, len)));
    start += len;
  }
  return digests;
}

// True when `suffix` is the tail of `all`.
bool EndsWith(const std::vector<crypto::Digest>& all, const std::vector<crypto::Digest>& suffix) {
  return suffix.size() <= all.size() && std::equal(suffix.rbegin(), suffix.rend(), all.rbegin());
}

const Bytes& BigRandom() {
  static const Bytes data = test_util::RandomBytes(kBig, 42);
  return data;
}

TEST(ChunkerTest, CutPointsAreStable) {
  // The cut points are part of the format: chunks of earlier snapshots are
  // reused only while the gear table, masks and rules stay the same. A change
  // here moves every cut of every existing backup.
  // The expected lengths were checked against an independent byte-at-a-time
  // implementation of the rules in chunker.cc (gear table, masks, skipping).
  Bytes data = test_util::RandomBytes(64 << 10, 7);
  std::vector<uint64_t> lengths = ChunkLengths(kSmall, data);
  ASSERT_GE(lengths.size(), 6u);
  EXPECT_EQ(std::vector<uint64_t>(lengths.begin(), lengths.begin() + 6),
            (std::vector<uint64_t>{4289, 4175, 4379, 9657, 4178, 5647}));
}

TEST(ChunkerTest, IsDeterministic) {
  Bytes data = test_util::RandomBytes(4 << 20, 1);
  EXPECT_EQ(ChunkLengths(kSmall, data), ChunkLengths(kSmall, data));
  EXPECT_NE(ChunkLengths(kSmall, data), ChunkLengths(kSmall, test_util::RandomBytes(4 << 20, 2)));
}

TEST(ChunkerTest, ChunksStayWithinBoundsAndAverageNearAvgSize) {
  for (const ChunkerParams& params : {ChunkerParams{}, kSmall}) {
    std::vector<uint64_t> lengths = ChunkLengths(params, BigRandom());
    ASSERT_GE(lengths.size(), 2u);
    uint64_t total = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      total += lengths[i];
      if (i + 1 < lengths.size()) {
        ASSERT_GE(lengths[i], params.min_size) << i;
        ASSERT_LE(lengths[i], params.max_size) << i;
      } else {
        ASSERT_GE(lengths[i], 1u);
        ASSERT_LE(lengths[i], params.max_size);
      }
    }
    EXPECT_EQ(total, kBig);
    // The mean over all but the tail (which is cut by the end of the data).
    double mean = static_cast<double>(total - lengths.back()) / (lengths.size() - 1);
    EXPECT_GE(mean, 0.5 * params.avg_size) << params.avg_size;
    EXPECT_LE(mean, 2.0 * params.avg_size) << params.avg_size;
  }
}

TEST(ChunkerTest, PiecewiseFeedingGivesTheSameCuts) {
  const Bytes& data = BigRandom();
  ByteSpan span(data.data(), 24 << 20);
  std::vector<uint64_t> whole = ChunkLengths(ChunkerParams{}, span);
  std::mt19937_64 rng(3);
  for (size_t max_piece : {size_t{7}, size_t{4096}, size_t{1} << 20, size_t{9} << 20}) {
    Chunker chunker;
    auto next = [&] { return static_cast<size_t>(rng() % (max_piece + 1)); };  // 0 included
    EXPECT_EQ(ChunkLengths(chunker, span, next), whole) << max_piece;
  }
  Chunker fixed_pieces;
  EXPECT_EQ(ChunkLengths(fixed_pieces, span, [] { return size_t{1} << 20; }), whole);
}

TEST(ChunkerTest, OneBytePiecesGiveTheSameCuts) {
  Bytes data = test_util::RandomBytes(1 << 20, 4);
  std::vector<uint64_t> whole = ChunkLengths(kSmall, data);
  ASSERT_GT(whole.size(), 100u);
  Chunker chunker(kSmall);
  EXPECT_EQ(ChunkLengths(chunker, data, [] { return size_t{1}; }), whole);
}

TEST(ChunkerTest, ZerosAreCutAtMaxSize) {
  for (const ChunkerParams& params : {ChunkerParams{}, kSmall}) {
    Bytes zeros(3 * params.max_size + 5, 0);
    EXPECT_EQ(ChunkLengths(params, zeros),
              (std::vector<uint64_t>{params.max_size, params.max_size, params.max_size, 5}));
    // The forced cut also falls at a piece boundary.
    Chunker chunker(params);
    EXPECT_EQ(chunker.FindCut(ByteSpan(zeros.data(), params.max_size - 1)), 0u);
    EXPECT_EQ(chunker.FindCut(ByteSpan(zeros.data(), 1)), 1u);
    EXPECT_EQ(chunker.pending(), 0u);
  }
}

TEST(ChunkerTest, InsertionNearStartLeavesLaterChunksUnchanged) {
  const Bytes& original = BigRandom();
  std::vector<crypto::Digest> before = ChunkDigests(ChunkerParams{}, original);
  ASSERT_GT(before.size(), 10u);
  const std::vector<crypto::Digest> tail(before.begin() + 2, before.end());

  Bytes inserted = original;
  Bytes extra = test_util::RandomBytes(100, 5);
  inserted.insert(inserted.begin() + 1000, extra.begin(), extra.end());
  EXPECT_TRUE(EndsWith(ChunkDigests(ChunkerParams{}, inserted), tail));

  Bytes deleted = original;
  deleted.erase(deleted.begin() + 10);
  EXPECT_TRUE(EndsWith(ChunkDigests(ChunkerParams{}, deleted), tail));
}

TEST(ChunkerTest, InsertionInTheMiddleChangesOnlyNearbyChunks) {
  Bytes original = test_util::RandomBytes(8 << 20, 6);
  std::vector<crypto::Digest> before = ChunkDigests(kSmall, original);
  Bytes changed = original;
  Bytes extra = test_util::RandomBytes(100, 8);
  changed.insert(changed.begin() + (4 << 20), extra.begin(), extra.end());
  std::vector<crypto::Digest> after = ChunkDigests(kSmall, changed);
  std::set<crypto::Digest> old_set(before.begin(), before.end());
  size_t new_chunks = std::count_if(after.begin(), after.end(),
                                    [&](const crypto::Digest& d) { return !old_set.contains(d); });
  EXPECT_GE(new_chunks, 1u);
  EXPECT_LE(new_chunks, 3u);
  EXPECT_GE(after.size() + 3, before.size());
}

TEST(ChunkerTest, ResetIsAForcedCut) {
  Bytes data = test_util::RandomBytes(1 << 20, 9);
  const size_t split = 5000;  // past min_size of kSmall, so the hash is rolling
  Chunker chunker(kSmall);
  ByteSpan head(data.data(), split);
  size_t consumed = 0;
  while (size_t cut = chunker.FindCut(head.subspan(consumed))) consumed += cut;
  ASSERT_GT(chunker.pending(), 0u);
  chunker.Reset();
  EXPECT_EQ(chunker.pending(), 0u);
  ByteSpan rest = ByteSpan(data).subspan(split);
  EXPECT_EQ(ChunkLengths(chunker, rest, [&] { return rest.size(); }), ChunkLengths(kSmall, rest));
}

TEST(ChunkerTest, PendingCountsTheUnfinishedChunk) {
  Chunker chunker;
  Bytes data = test_util::RandomBytes(1000, 10);
  EXPECT_EQ(chunker.FindCut(ByteSpan()), 0u);
  EXPECT_EQ(chunker.FindCut(data), 0u);  // within min_size: never a cut
  EXPECT_EQ(chunker.pending(), 1000u);
  EXPECT_EQ(chunker.FindCut(data), 0u);
  EXPECT_EQ(chunker.pending(), 2000u);
  EXPECT_EQ(chunker.params().avg_size, 2u << 20);
}

TEST(ChunkerDeathTest, RejectsInvalidParams) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Chunker({.min_size = 32, .avg_size = 4096, .max_size = 16384}), "invalid");
  EXPECT_DEATH(Chunker({.min_size = 4096, .avg_size = 4096, .max_size = 16384}), "invalid");
  EXPECT_DEATH(Chunker({.min_size = 1024, .avg_size = 6000, .max_size = 16384}), "invalid");
  EXPECT_DEATH(Chunker({.min_size = 1024, .avg_size = 4096, .max_size = 4096}), "invalid");
  EXPECT_DEATH(Chunker({.min_size = 1 << 20, .avg_size = 8 << 20, .max_size = 32 << 20}),
               "invalid");
}

}  // namespace
}  // namespace cairn::index
