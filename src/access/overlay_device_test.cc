#include "access/overlay_device.h"

#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "access/test_source.h"
#include "tests/unit_test_util.h"

namespace cairn::access {
namespace {

using test_util::CodeOf;
using test_util::RandomBytes;

constexpr uint32_t kChunk = 64u << 10;
constexpr size_t kCount = 40;

class OverlayDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    image_.resize(kCount * kChunk - 1000);  // not a whole number of 4 KiB blocks
    std::vector<crypto::Digest> ids;
    for (size_t i = 0; i < kCount; ++i) {
      const size_t start = i * kChunk;
      const size_t len = std::min<size_t>(kChunk, image_.size() - start);
      Bytes plain = RandomBytes(len, 500 + i);
      std::copy(plain.begin(), plain.end(), image_.begin() + static_cast<ptrdiff_t>(start));
      ids.push_back(source_.Add(plain));
    }
    index::FixedIndex idx(image_.size(), kChunk, ids);
    csum_ = idx.csum();
    StreamReaderOptions o;
    o.cache = &cache_;
    o.source = &source_;
    o.description = "archive disk0.img of vm/1/T";
    reader_ = std::make_unique<StreamReader>(MapImage(std::move(idx), nullptr), o);
    env_ = NewPosixEnv();
    path_ = tmp_.Join("overlay");
  }

  std::unique_ptr<OverlayDevice> Open() {
    auto d = OverlayDevice::Open(*env_, path_, *reader_, csum_);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? std::move(*d) : nullptr;
  }
  // Reads the whole device and compares it with `want`.
  void ExpectContent(OverlayDevice& d, const Bytes& want) {
    Bytes all(d.size());
    CAIRN_ASSERT_OK(d.Read(0, all));
    ASSERT_EQ(all.size(), want.size());
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i] != want[i]) FAIL() << "first difference at byte " << i;
    }
  }
  void Apply(Bytes& target, uint64_t offset, const Bytes& data) {
    std::copy(data.begin(), data.end(), target.begin() + static_cast<ptrdiff_t>(offset));
  }

  test_util::TempDir tmp_;
  TestSource source_;
  ChunkCache cache_{{.capacity_bytes = 64u << 20}};
  Bytes image_;
  crypto::Digest csum_{};
  std::unique_ptr<StreamReader> reader_;
  std::unique_ptr<Env> env_;
  std::string path_;
};

TEST_F(OverlayDeviceTest, WritesOfEveryShapeReadBackOverTheArchive) {
  auto d = Open();
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->size(), image_.size());
  ExpectContent(*d, image_);
  Bytes want = image_;
  struct W { uint64_t offset; size_t len; };
  // Whole blocks; a partial block; one spanning segments; the short tail.
  for (W w : {W{8192, 8192}, W{100, 10}, W{60000, 200000}, W{image_.size() - 700, 700},
              W{4095, 2}}) {
    Bytes data = RandomBytes(w.len, w.offset);
    CAIRN_ASSERT_OK(d->Write(w.offset, data));
    Apply(want, w.offset, data);
  }
  ExpectContent(*d, want);
  // Unaligned reads across written and unwritten blocks.
  for (uint64_t off : {uint64_t{90}, uint64_t{4000}, uint64_t{59000}, image_.size() - 5000}) {
    Bytes got(4500);
    CAIRN_ASSERT_OK(d->Read(off, got));
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + static_cast<ptrdiff_t>(off))) << off;
  }
  EXPECT_GT(d->blocks_written(), 50u);
}

TEST_F(OverlayDeviceTest, WritesSurviveReopeningAndTheStoreIsNeverWritten) {
  Bytes want = image_;
  {
    auto d = Open();
    Bytes data = RandomBytes(30000, 1);
    CAIRN_ASSERT_OK(d->Write(12345, data));
    Apply(want, 12345, data);
    CAIRN_ASSERT_OK(d->Close());
  }
  auto d = Open();
  ExpectContent(*d, want);
  // The archive itself still reads as it was.
  Bytes base(image_.size());
  CAIRN_ASSERT_OK(reader_->Read(0, base));
  EXPECT_EQ(base, image_);
}

TEST_F(OverlayDeviceTest, OnlyFlushedWritesAreNamedByTheBitmapOnDisk) {
  auto d = Open();
  Bytes first = RandomBytes(4096, 2), second = RandomBytes(4096, 3);
  CAIRN_ASSERT_OK(d->Write(0, first));
  CAIRN_ASSERT_OK(d->Flush());
  CAIRN_ASSERT_OK(d->Write(4096 * 10, second));
  // A copy of the file now is what a crash before the next flush leaves.
  const std::string crashed = tmp_.Join("crashed");
  std::filesystem::copy_file(path_, crashed);
  auto after = OverlayDevice::Open(*env_, crashed, *reader_, csum_);
  CAIRN_ASSERT_OK(after);
  Bytes want = image_;
  Apply(want, 0, first);  // flushed: kept; the second write: not named
  ExpectContent(**after, want);
}

TEST_F(OverlayDeviceTest, AnotherImagesOverlayIsRefused) {
  { auto d = Open(); CAIRN_ASSERT_OK(d->Close()); }
  crypto::Digest other = csum_;
  other[0] ^= 1;
  auto d = OverlayDevice::Open(*env_, path_, *reader_, other);
  EXPECT_EQ(CodeOf(d), StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(d.status().message()).find("belongs to another image"), std::string::npos);
}

TEST_F(OverlayDeviceTest, AnOverlayInUseIsRefused) {
  auto d = Open();
  auto second = OverlayDevice::Open(*env_, path_, *reader_, csum_);
  EXPECT_EQ(CodeOf(second), StatusCode::kUnavailable);
}

TEST_F(OverlayDeviceTest, ConcurrentPartialWritesToOneBlockAllLand) {
  auto d = Open();
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t) {
    writers.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const uint8_t b = static_cast<uint8_t>(t + 1);
        // Each thread owns bytes [t*500, t*500 + 500) of block 3.
        Bytes data(500, b);
        EXPECT_TRUE(d->Write(3 * 4096 + uint64_t(t) * 500, data).ok());
      }
    });
  }
  for (auto& w : writers) w.join();
  Bytes got(4096);
  CAIRN_ASSERT_OK(d->Read(3 * 4096, got));
  for (int t = 0; t < 8; ++t) {
    for (int i = 0; i < 500; ++i) ASSERT_EQ(got[t * 500 + i], t + 1) << t;
  }
  EXPECT_TRUE(std::equal(got.begin() + 4000, got.end(), image_.begin() + 3 * 4096 + 4000));
}

TEST(OverlayHeaderTest, RoundTripsAndRefusesDamage) {
  crypto::Digest csum{};
  csum[5] = 7;
  OverlayHeader h = OverlayLayout((uint64_t{2} << 30) + 123, csum);
  Bytes b = EncodeOverlayHeader(h);
  auto back = DecodeOverlayHeader(b);
  CAIRN_ASSERT_OK(back);
  EXPECT_EQ(back->image_size, h.image_size);
  EXPECT_EQ(back->data_offset, h.data_offset);
  EXPECT_EQ(back->base_csum, csum);
  EXPECT_EQ(h.data_offset, 4096u + 65536u + 4096u);  // 2^19 + 1 blocks: one more bitmap page
  for (size_t at : {size_t{0}, size_t{8}, size_t{20}, size_t{72}, size_t{100}}) {
    Bytes bad = b;
    bad[at] ^= 1;
    EXPECT_EQ(CodeOf(DecodeOverlayHeader(bad)), StatusCode::kDataLoss) << "byte " << at;
  }
  EXPECT_EQ(CodeOf(DecodeOverlayHeader(ByteSpan(b.data(), 100))), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn::access
