// Incremental backup: a second backup of an unchanged image stores nothing
// new; after a contiguous write only the chunks it touched are stored.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// Chunks a write of `len` bytes at `offset` touches.
uint64_t TouchedChunks(uint64_t offset, uint64_t len) {
  return (offset + len - 1) / kChunk - offset / kChunk + 1;
}

class DedupTest : public CliTest {
 protected:
  // A sparse image of `size` bytes where every `stride`-th chunk holds 1 MiB
  // of random data (at a varying offset inside the chunk) and every
  // 4·`stride`-th chunk 2 MiB of text behind it: cheap to create and to read,
  // yet with many distinct non-zero chunks. Returns how many chunks hold data.
  uint64_t MakeImage(const std::string& path, uint64_t size, uint64_t stride) {
    ImageWriter w(path, size, 42);
    uint64_t data_chunks = 0;
    for (uint64_t c = 0; c < size / kChunk; c += stride, ++data_chunks) {
      uint64_t base = c * kChunk;
      w.Random(base + (c % 3) * kMiB + c, kMiB);
      if (c % (4 * stride) == 0) w.Text(base + 2 * kMiB - 7, 2 * kMiB);
    }
    return data_chunks;
  }

  size_t CountChunkFiles() const { return ChunkFiles(store()).size(); }
};

TEST_F(DedupTest, UnchangedImageStoresNothingAndChangesStoreOnlyTouchedChunks) {
  // 2 GiB (256 MiB with CAIRN_TEST_LARGE=0).
  const uint64_t size = LargeTestsEnabled() ? 2 * kGiB : 256 * kMiB;
  const uint64_t chunks = size / kChunk;
  const std::string img = Path("vm100.raw");
  const uint64_t data_chunks = MakeImage(img, size, LargeTestsEnabled() ? 8 : 4);
  ASSERT_GE(data_chunks, 16u);
  const std::string spec = "disk0.img=" + img;

  // First backup: every data chunk, plus the zero chunk once.
  nlohmann::json j = Backup("vm/100", 1, {spec});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["chunks"], chunks);
  EXPECT_EQ(j["archives"][0]["new_chunks"], data_chunks + 1);
  EXPECT_EQ(j["archives"][0]["zero_chunks"], chunks - data_chunks);
  EXPECT_EQ(j["archives"][0]["dedup_base"], false);
  const size_t files_after_first = CountChunkFiles();
  EXPECT_EQ(files_after_first, data_chunks + 1);

  // Unchanged: nothing new, nothing written to the chunk store.
  j = Backup("vm/100", 2, {spec});
  ASSERT_TRUE(j.is_object());
  const auto& a2 = j["archives"][0];
  EXPECT_EQ(a2["new_chunks"], 0) << a2.dump();
  EXPECT_EQ(a2["new_bytes"], 0);
  EXPECT_EQ(a2["stored_bytes"], 0);
  EXPECT_EQ(a2["reused_chunks"], chunks);
  EXPECT_EQ(a2["dedup_base"], true);
  EXPECT_EQ(CountChunkFiles(), files_after_first);

  // 10 MiB at a non-aligned offset: 3 chunks touched.
  const uint64_t off1 = 25 * kChunk + 12345;
  ASSERT_EQ(TouchedChunks(off1, 10 * kMiB), 3u);
  WriteRandomAt(img, off1, 10 * kMiB, 1001);
  j = Backup("vm/100", 3, {spec});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["new_chunks"], 3) << j.dump();
  EXPECT_EQ(j["archives"][0]["new_bytes"], 3 * kChunk);
  EXPECT_EQ(j["archives"][0]["reused_chunks"], chunks - 3);
  EXPECT_EQ(CountChunkFiles(), files_after_first + 3);

  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(DedupTest, ChangeAcrossFourChunksAndOtherGroupsShareChunks) {
  // The same checks on 64 MiB, with a write that touches four chunks; then
  // a second group backs up the same image and finds every chunk stored.
  const uint64_t size = 64 * kMiB;
  const std::string img = Path("small.raw");
  const uint64_t data_chunks = MakeImage(img, size, 2);
  const std::string spec = "disk0.img=" + img;
  nlohmann::json j = Backup("vm/100", 1, {spec});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["new_chunks"], data_chunks + 1);
  const size_t files_after_first = CountChunkFiles();

  const uint64_t off = 5 * kChunk + 3 * kMiB;
  ASSERT_EQ(TouchedChunks(off, 10 * kMiB), 4u);
  WriteRandomAt(img, off, 10 * kMiB, 1002);
  j = Backup("vm/100", 2, {spec});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["new_chunks"], 4) << j.dump();
  EXPECT_EQ(j["archives"][0]["reused_chunks"], size / kChunk - 4);
  EXPECT_EQ(CountChunkFiles(), files_after_first + 4);

  j = Backup("vm/200", 3, {spec});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["dedup_base"], false);
  EXPECT_EQ(j["archives"][0]["new_chunks"], 0) << j.dump();
  EXPECT_EQ(CountChunkFiles(), files_after_first + 4);

  // Both snapshots of the changed image restore byte-identical.
  for (const auto& [snap, out] :
       {std::pair{"vm/100/latest", "back100.raw"}, std::pair{"vm/200/latest", "back200.raw"}}) {
    RunResult r = OnStore("restore", {snap, "disk0.img", Path(out)});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(img, Path(out)), "") << snap;
  }
}

TEST_F(DedupTest, RepeatedChunkWithinOneImageIsStoredOnce) {
  // One random chunk repeated eight times, and a text chunk twice.
  ImageWriter w(Path("rep.raw"), 10 * kChunk, 7);
  w.Random(0, kChunk).Text(8 * kChunk, kChunk);
  for (uint64_t c = 1; c < 8; ++c) w.Copy(0, c * kChunk, kChunk);
  w.Copy(8 * kChunk, 9 * kChunk, kChunk);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("rep.raw")});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["new_chunks"], 2);
  EXPECT_EQ(j["archives"][0]["reused_chunks"], 8);
  EXPECT_EQ(CountChunkFiles(), 2u);
}

}  // namespace
}  // namespace cairn::cli_test
