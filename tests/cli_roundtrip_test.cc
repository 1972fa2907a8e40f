// Round trips through the real binary: back up an image, restore it to a new
// file, to stdout and over an existing file full of garbage, and compare
// byte by byte.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "cli_fixture.h"

namespace cairn::cli_test {
namespace {

// Which restores ExpectRestoresEqual runs besides the one to a new file.
struct Ways {
  bool to_stdout = true;
  bool overwrite = true;
  // When set, a restore to a new file may allocate at most this much (zero
  // chunks stay holes).
  std::optional<uint64_t> max_allocated;
};

class RoundTripTest : public CliTest {
 protected:
  // Restores `archive` of `snapshot` to a new file, to stdout and with
  // --overwrite onto a garbage-filled file, and compares each with `source`.
  void ExpectRestoresEqual(const std::string& snapshot, const std::string& archive,
                           const std::string& source, const Ways& ways = {}) {
    SCOPED_TRACE(snapshot + " " + archive);
    const std::string fresh = Path("restored-" + archive);
    RunResult r = OnStore("restore", {snapshot, archive, fresh});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(source, fresh), "");
    EXPECT_FALSE(Exists(fresh + ".partial"));
    if (ways.max_allocated) {
      EXPECT_LE(AllocatedBytes(fresh), *ways.max_allocated)
          << "zero chunks of a restore to a new file should stay holes";
    }

    if (ways.to_stdout) {
      StreamComparer stream(source);
      RunOptions to_sink;
      to_sink.stdout_sink = [&](std::string_view piece) { stream.Feed(piece); };
      r = OnStore("restore", {snapshot, archive, "-"}, to_sink);
      ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
      EXPECT_EQ(stream.Result(), "") << "restore to stdout";
    }

    if (!ways.overwrite) return;
    // Garbage everywhere, and longer than the image: zero chunks must come
    // back as zeros and the file must end where the image ends.
    const std::string existing = Path("existing-" + archive);
    ImageWriter(existing, FileSize(source) + 3 * kMiB + 17, 0x6a7b)
        .Fill(0, FileSize(source) + 3 * kMiB + 17, 0xa5);
    r = OnStore("restore", {snapshot, archive, existing, "--overwrite"});
    ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
    EXPECT_EQ(CompareFiles(source, existing), "") << "restore --overwrite onto garbage";
  }

  // A sparse image of `size` = N·4 MiB + 1 MiB, mostly holes, with data at the
  // start, across the chunk boundary in the middle, across the start of the
  // last full chunk (2^32 in the large case: offsets past it catch 32-bit
  // truncation) and in the short last chunk. Backs it up and restores it;
  // the restored file must be sparse (far fewer bytes allocated than its
  // size). --overwrite would allocate every zero; the other round trips
  // cover it.
  void CheckSparseRoundTrip(uint64_t size, bool to_stdout) {
    const uint64_t chunks = size / kChunk + 1;
    const uint64_t mid = chunks / 2 * kChunk;            // a chunk boundary
    const uint64_t high = (size / kChunk - 1) * kChunk;  // start of the last full chunk
    const std::string src = Path("sparse.raw");
    ImageWriter(src, size, 8)
        .Random(0, kMiB)
        .Text(mid - kMiB, 2 * kMiB)
        .Random(high - 3 * kMiB + 11, 5 * kMiB)
        .Random(size - 300 * kKiB, 300 * kKiB);
    nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + src});
    ASSERT_TRUE(j.is_object());
    const auto& a = j["archives"][0];
    EXPECT_EQ(a["bytes"], size);
    EXPECT_EQ(a["chunks"], chunks);
    // Chunks with data: the first, two around the middle, the last two full
    // ones and the short tail.
    EXPECT_EQ(a["zero_chunks"], chunks - 6);
    EXPECT_EQ(a["new_chunks"], 6 + 1);  // plus the zero chunk, stored once
    ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", src,
                        {.to_stdout = to_stdout, .overwrite = false, .max_allocated = 64 * kMiB});
    RunResult r = OnStore("verify", {});
    EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
  }
};

TEST_F(RoundTripTest, ZerosImageRestoresAsHoles) {
  // Explicit zeros (allocated in the source), eight full chunks and a tail.
  const uint64_t size = 8 * kChunk + 1000;
  ImageWriter(Path("zeros.raw"), size, 1).Zeros(0, size);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("zeros.raw")});
  ASSERT_TRUE(j.is_object());
  const auto& a = j["archives"][0];
  EXPECT_EQ(a["chunks"], 9);
  EXPECT_EQ(a["zero_chunks"], 9);
  // The full zero chunk and the 1000-byte zero tail: two distinct chunks.
  EXPECT_EQ(a["new_chunks"], 2);
  EXPECT_EQ(ChunkFiles(store()).count(ZeroChunkId()), 1u);
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("zeros.raw"),
                      {.max_allocated = 1 * kMiB});
}

TEST_F(RoundTripTest, RandomImage) {
  const uint64_t size = 6 * kChunk;
  ImageWriter(Path("random.raw"), size, 2).Random(0, size);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("random.raw")});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["new_chunks"], 6);
  EXPECT_EQ(j["archives"][0]["zero_chunks"], 0);
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("random.raw"));
}

TEST_F(RoundTripTest, CompressibleImageIsStoredSmaller) {
  const uint64_t size = 5 * kChunk + 333;
  ImageWriter(Path("text.raw"), size, 3).Text(0, size);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("text.raw")});
  ASSERT_TRUE(j.is_object());
  const auto& a = j["archives"][0];
  EXPECT_EQ(a["new_chunks"], 6);
  EXPECT_LT(a["stored_bytes"].get<uint64_t>(), size / 2) << "text should compress";
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("text.raw"));
}

TEST_F(RoundTripTest, DuplicatedRegionsAreStoredOnce) {
  // Chunks 0-3 random, 4-7 a copy of 0-3 (chunk-aligned: deduplicated),
  // then an unaligned copy of 1 MiB of chunk 0 inside chunk 8.
  const uint64_t size = 9 * kChunk;
  ImageWriter(Path("dup.raw"), size, 4)
      .Random(0, 4 * kChunk)
      .Copy(0, 4 * kChunk, 4 * kChunk)
      .Copy(12345, 8 * kChunk + 777, kMiB);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("dup.raw")});
  ASSERT_TRUE(j.is_object());
  const auto& a = j["archives"][0];
  EXPECT_EQ(a["chunks"], 9);
  EXPECT_EQ(a["new_chunks"], 5);
  EXPECT_EQ(a["reused_chunks"], 4);
  EXPECT_EQ(ChunkFiles(store()).size(), 5u);
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("dup.raw"));
}

TEST_F(RoundTripTest, MixedImageOfOddSize) {
  // Not a multiple of 4 MiB; holes, explicit zeros, random, text, duplicates,
  // a chunk half zero and half data, and a short random tail.
  const uint64_t size = 10 * kChunk + 123457;
  ImageWriter(Path("mixed.raw"), size, 5)
      .Random(1 * kChunk, kChunk)
      .Text(2 * kChunk, kChunk)
      .Copy(1 * kChunk, 3 * kChunk, kChunk)
      .Random(4 * kChunk + 2 * kMiB, 2 * kMiB)
      .Zeros(5 * kChunk, kChunk)
      .Text(6 * kChunk + 5, kChunk - 5)
      .Copy(2 * kChunk + 100, 7 * kChunk + 4000, 3 * kMiB)
      .Random(9 * kChunk, kChunk + 123457);
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("mixed.raw")});
  ASSERT_TRUE(j.is_object());
  const auto& a = j["archives"][0];
  EXPECT_EQ(a["bytes"], size);
  EXPECT_EQ(a["chunks"], 11);
  EXPECT_EQ(a["zero_chunks"], 3);  // chunks 0, 5, 8
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("mixed.raw"));
}

TEST_F(RoundTripTest, ImageWithAllZeroShortTail) {
  // The last chunk is short and all zeros: its id is not the full zero
  // chunk's, and it must still come back as zeros everywhere.
  const uint64_t size = 2 * kChunk + 65537;
  ImageWriter(Path("tail.raw"), size, 6).Random(0, kChunk);
  Backup("vm/100", 1, {"disk0.img=" + Path("tail.raw")});
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("tail.raw"));
}

TEST_F(RoundTripTest, ImageSmallerThanOneChunk) {
  ImageWriter(Path("small.raw"), 4097, 7).Random(0, 4097);
  Backup("vm/100", 1, {"disk0.img=" + Path("small.raw")});
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("small.raw"));
}

TEST_F(RoundTripTest, EmptySource) {
  WriteFile(Path("empty.raw"), "");
  nlohmann::json j = Backup("vm/100", 1, {"disk0.img=" + Path("empty.raw")});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["bytes"], 0);
  EXPECT_EQ(j["archives"][0]["chunks"], 0);
  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("empty.raw"));
  RunResult r = OnStore("verify", {});
  EXPECT_EQ(r.exit_code, kExitOk) << r.Describe();
}

TEST_F(RoundTripTest, SparseSourceLargerThan4GiB) {
  if (!LargeTestsEnabled()) GTEST_SKIP() << "skipped with CAIRN_TEST_LARGE=0";
  // 4 GiB + 5 MiB: the restore to stdout streams it all through a pipe.
  CheckSparseRoundTrip(4 * kGiB + 5 * kMiB, /*to_stdout=*/true);
}

TEST_F(RoundTripTest, SparseSource) {
  CheckSparseRoundTrip(256 * kMiB + 5 * kMiB, /*to_stdout=*/true);
}

TEST_F(RoundTripTest, BlobArchive) {
  std::string conf = "# vm 100\nmemory: 4096\ncores: 4\n";
  for (int i = 0; i < 200; ++i) conf += "net" + std::to_string(i) + ": virtio,bridge=vmbr0\n";
  conf += std::string("binary\0\x01\xff tail", 14);
  WriteFile(Path("vm.conf"), conf);
  nlohmann::json j = Backup("vm/100", 1, {"vm.conf.blob=" + Path("vm.conf")});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["archives"][0]["kind"], "blob");
  EXPECT_EQ(j["archives"][0]["bytes"], conf.size());
  ExpectRestoresEqual(Snap("vm/100", 1), "vm.conf.blob", Path("vm.conf"));
}

TEST_F(RoundTripTest, EmptyBlobArchive) {
  WriteFile(Path("empty.conf"), "");
  Backup("ct/7", 1, {"empty.blob=" + Path("empty.conf")});
  ExpectRestoresEqual(Snap("ct/7", 1), "empty.blob", Path("empty.conf"));
}

TEST_F(RoundTripTest, SeveralArchivesInOneSnapshot) {
  ImageWriter(Path("d0.raw"), 3 * kChunk + 5, 9).Random(0, kChunk).Text(2 * kChunk, kChunk + 5);
  ImageWriter(Path("d1.raw"), 2 * kChunk, 10).Random(kChunk, kChunk);
  WriteFile(Path("vm.conf"), "cores: 2\n");
  nlohmann::json j = Backup("vm/100", 1,
                            {"disk0.img=" + Path("d0.raw"), "disk1.img=" + Path("d1.raw"),
                             "vm.conf.blob=" + Path("vm.conf")});
  ASSERT_TRUE(j.is_object());
  ASSERT_EQ(j["archives"].size(), 3u);
  EXPECT_EQ(j["bytes"], 3 * kChunk + 5 + 2 * kChunk + 9);

  nlohmann::json snaps = SnapshotsJson();
  ASSERT_EQ(snaps.size(), 1u);
  std::map<std::string, uint64_t> sizes;
  for (const auto& a : snaps[0]["archives"]) {
    sizes[a["name"].get<std::string>()] = a["size"].get<uint64_t>();
  }
  EXPECT_EQ(sizes,
            (std::map<std::string, uint64_t>{
                {"disk0.img", 3 * kChunk + 5}, {"disk1.img", 2 * kChunk}, {"vm.conf.blob", 9}}));

  ExpectRestoresEqual(Snap("vm/100", 1), "disk0.img", Path("d0.raw"));
  ExpectRestoresEqual(Snap("vm/100", 1), "disk1.img", Path("d1.raw"));
  ExpectRestoresEqual(Snap("vm/100", 1), "vm.conf.blob", Path("vm.conf"));
}

TEST_F(RoundTripTest, LatestResolvesToNewestSnapshot) {
  // Backed up out of time order: latest is the newest time, not the last run.
  ImageWriter(Path("a.raw"), kChunk + 1, 11).Random(0, kChunk + 1);
  ImageWriter(Path("b.raw"), kChunk + 2, 12).Random(0, kChunk + 2);
  ImageWriter(Path("c.raw"), kChunk + 3, 13).Random(0, kChunk + 3);
  ImageWriter(Path("other.raw"), kChunk, 14).Random(0, kChunk);
  Backup("vm/100", 50, {"disk0.img=" + Path("b.raw")});
  Backup("vm/100", 10, {"disk0.img=" + Path("a.raw")});
  Backup("vm/100", 30, {"disk0.img=" + Path("c.raw")});
  Backup("vm/101", 90, {"disk0.img=" + Path("other.raw")});  // another group

  RunResult r = OnStore("restore", {"vm/100/latest", "disk0.img", Path("latest.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("b.raw"), Path("latest.raw")), "");
  r = OnStore("restore", {Snap("vm/100", 10), "disk0.img", Path("t10.raw")});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), Path("t10.raw")), "");

  // Verify accepts latest too, and the group listing is oldest first.
  r = OnStore("verify", {"vm/100/latest", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json v = ParseJson(r.out);
  ASSERT_EQ(v["snapshots"].size(), 1u);
  EXPECT_EQ(v["snapshots"][0]["snapshot"], Snap("vm/100", 50));
  r = OnStore("snapshots", {"vm/100", "--json"});
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  nlohmann::json list = ParseJson(r.out);
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["snapshot"], Snap("vm/100", 10));
  EXPECT_EQ(list[1]["snapshot"], Snap("vm/100", 30));
  EXPECT_EQ(list[2]["snapshot"], Snap("vm/100", 50));
}

TEST_F(RoundTripTest, RepoFromEnvironment) {
  ImageWriter(Path("a.raw"), kChunk, 15).Random(0, kChunk);
  RunOptions env;
  env.env = {"CAIRN_REPO=" + store()};
  RunResult r = Cairn(
      {"backup", "--id", "host/web1", "--time", SnapTime(1), "root.img=" + Path("a.raw")}, env);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  r = Cairn({"restore", "host/web1/latest", "root.img", Path("back.raw")}, env);
  ASSERT_EQ(r.exit_code, kExitOk) << r.Describe();
  EXPECT_EQ(CompareFiles(Path("a.raw"), Path("back.raw")), "");
}

}  // namespace
}  // namespace cairn::cli_test
