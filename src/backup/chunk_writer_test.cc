#include "backup/chunk_writer.h"

#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "blob/blob.h"
#include "index/fixed_index.h"
#include "tests/unit_test_util.h"

namespace cairn::backup {
namespace {

// Counts every question and insert, to show each step runs once.
class CountingSink final : public store::ChunkSink {
 public:
  Result<store::InsertResult> Insert(const store::ChunkId& id, ByteSpan stored) override {
    std::lock_guard lock(mu_);
    ++inserts;
    return Put(id, stored);
  }
  Result<store::InsertResult> InsertAbsent(const store::ChunkId& id, ByteSpan stored) override {
    std::lock_guard lock(mu_);
    ++absent_inserts;
    return Put(id, stored);
  }
  Result<bool> Contains(const store::ChunkId& id) override {
    std::lock_guard lock(mu_);
    ++contains;
    return chunks.contains(id);
  }
  Status Flush() override { return Status::Ok(); }

  std::mutex mu_;
  std::map<store::ChunkId, Bytes> chunks;
  int inserts = 0, absent_inserts = 0, contains = 0;

 private:
  store::InsertResult Put(const store::ChunkId& id, ByteSpan stored) {
    auto [it, fresh] = chunks.try_emplace(id, stored.begin(), stored.end());
    return fresh ? store::InsertResult{true, stored.size()} : store::InsertResult{false, 0};
  }
};

TEST(ChunkWriterTest, EachNewChunkIsCheckedOnceAndInsertedWithoutAskingAgain) {
  CountingSink sink;
  const Bytes a = test_util::RandomBytes(5000, 1);
  const Bytes b = test_util::RandomBytes(5000, 2);
  const Bytes known_chunk = test_util::RandomBytes(5000, 3);
  const DigestSet known = {blob::ChunkId(known_chunk, nullptr)};
  ChunkWriter writer(sink, {.known = &known});

  auto id_a = writer.Store(a);
  CAIRN_ASSERT_OK(id_a);
  EXPECT_EQ(*id_a, crypto::Sha256(a));
  EXPECT_EQ(sink.contains, 1);
  EXPECT_EQ(sink.absent_inserts, 1);
  EXPECT_EQ(sink.inserts, 0);  // never the Insert that would ask again

  // Met again in this run: claimed, so nothing is asked or stored.
  CAIRN_ASSERT_OK(writer.Store(a));
  // In the dedup base: not even asked.
  CAIRN_ASSERT_OK(writer.Store(known_chunk));
  EXPECT_EQ(sink.contains, 1);
  EXPECT_EQ(sink.absent_inserts, 1);

  // Already in the store: asked once, not encoded or inserted.
  auto id_b = crypto::Sha256(b);
  sink.chunks[id_b] = Bytes{1};
  CAIRN_ASSERT_OK(writer.Store(b));
  EXPECT_EQ(sink.contains, 2);
  EXPECT_EQ(sink.absent_inserts, 1);

  const ChunkWriterStats s = writer.stats();
  EXPECT_EQ(s.chunks, 4u);
  EXPECT_EQ(s.new_chunks, 1u);
  EXPECT_EQ(s.new_bytes, a.size());
  EXPECT_EQ(s.reused_chunks, 3u);
  EXPECT_EQ(s.reused_bytes, 3 * 5000u);
  // What was stored decodes back to the chunk.
  auto decoded = blob::DecodeChunk(sink.chunks[*id_a], *id_a);
  CAIRN_ASSERT_OK(decoded);
  EXPECT_EQ(*decoded, a);
}

TEST(ChunkWriterTest, ZeroChunksOfAnyLengthHaveTheirKnownIds) {
  CountingSink sink;
  ChunkWriter writer(sink, {.usual_length = index::kMinChunkSize});
  for (size_t len : {size_t{index::kMinChunkSize}, size_t{1000}, size_t{1000}}) {
    const Bytes zeros(len, 0);
    auto id = writer.Store(zeros);
    CAIRN_ASSERT_OK(id);
    EXPECT_EQ(*id, crypto::Sha256(zeros)) << len;
  }
  EXPECT_EQ(writer.stats().zero_chunks, 3u);
  EXPECT_EQ(writer.stats().new_chunks, 2u);  // the 1000-byte one once
}

}  // namespace
}  // namespace cairn::backup
