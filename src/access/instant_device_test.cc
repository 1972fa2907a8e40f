#include "access/instant_device.h"

#include <gtest/gtest.h>

#include "access/test_source.h"
#include "tests/unit_test_util.h"

namespace cairn::access {
namespace {

using test_util::RandomBytes;

constexpr uint32_t kChunk = 64u << 10;
constexpr size_t kCount = 8;

// An image of kCount chunks (chunk 5 zero), a target file, and the gate
// driven by hand as RestoreImages would drive it.
class InstantDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    image_.resize(kCount * kChunk);
    std::vector<crypto::Digest> ids;
    for (size_t i = 0; i < kCount; ++i) {
      Bytes plain = i == 5 ? Bytes(kChunk, 0) : RandomBytes(kChunk, 40 + i);
      std::copy(plain.begin(), plain.end(), image_.begin() + static_cast<ptrdiff_t>(i * kChunk));
      ids.push_back(i == 5 ? blob::ChunkId(plain, nullptr) : source_.Add(plain));
    }
    StreamReaderOptions o;
    o.cache = &cache_;
    o.source = &source_;
    o.description = "archive disk0.img of vm/1/T";
    o.readahead.enabled = false;
    reader_ = std::make_unique<StreamReader>(MapImage(index::FixedIndex(image_.size(), kChunk, ids), nullptr), o);
    env_ = NewPosixEnv();
    target_ = tmp_.Join("target.partial");
    auto f = env_->OpenWritable(target_, OpenMode::kCreateNew);
    ASSERT_TRUE(f.ok());
    file_ = std::move(*f);
    CAIRN_ASSERT_OK(file_->Truncate(image_.size()));  // as RestoreImages does: holes
    device_ = std::make_unique<InstantDevice>(*env_, *reader_);
  }
  // What the restore does for chunk c: the gate decides, `write` pwrites.
  bool RestoreChunk(size_t c) {
    bool wrote = false;
    ByteSpan plain(image_.data() + c * kChunk, kChunk);
    Status s = device_->gate().Write(0, c * kChunk, plain, [&] {
      wrote = true;
      return file_->WriteAt(c * kChunk, plain);
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return wrote;
  }
  Bytes ReadDevice(uint64_t offset, size_t n) {
    Bytes b(n);
    Status s = device_->Read(offset, b);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return b;
  }
  Bytes Slice(const Bytes& b, uint64_t offset, size_t n) {
    return Bytes(b.begin() + static_cast<ptrdiff_t>(offset), b.begin() + static_cast<ptrdiff_t>(offset + n));
  }

  test_util::TempDir tmp_;
  TestSource source_;
  ChunkCache cache_{{.capacity_bytes = 64u << 20}};
  Bytes image_;
  std::unique_ptr<StreamReader> reader_;
  std::unique_ptr<Env> env_;
  std::string target_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<InstantDevice> device_;
};

TEST_F(InstantDeviceTest, ReadsComeFromTheStoreUntilRestoredThenFromTheTarget) {
  EXPECT_EQ(ReadDevice(0, image_.size()), image_);  // nothing restored, not even opened
  CAIRN_ASSERT_OK(device_->gate().Opened(0, target_, /*fresh=*/true));
  EXPECT_EQ(device_->restored_chunks(), 1u);  // the zero chunk: a hole already
  EXPECT_TRUE(RestoreChunk(2));
  const int reads_before = source_.TotalReads();
  // Chunk 2 now comes from the target: prove it by changing the file under it.
  Bytes marker(16, 0x5A);
  CAIRN_ASSERT_OK(file_->WriteAt(2 * kChunk, marker));
  EXPECT_EQ(ReadDevice(2 * kChunk, 16), marker);
  EXPECT_EQ(source_.TotalReads(), reads_before);
  EXPECT_EQ(ReadDevice(3 * kChunk, kChunk), Slice(image_, 3 * kChunk, kChunk));  // from the store
}

TEST_F(InstantDeviceTest, AClientWriteBeforeTheRestoreWinsAndTheRestoreSkipsTheChunk) {
  CAIRN_ASSERT_OK(device_->gate().Opened(0, target_, true));
  Bytes w = RandomBytes(1000, 7);
  CAIRN_ASSERT_OK(device_->Write(4 * kChunk + 500, w));  // chunk 4, in part
  EXPECT_EQ(device_->client_chunks(), 1u);
  EXPECT_FALSE(RestoreChunk(4));  // skipped: the client's bytes stay
  EXPECT_TRUE(RestoreChunk(6));
  Bytes want = image_;
  std::copy(w.begin(), w.end(), want.begin() + 4 * kChunk + 500);
  EXPECT_EQ(ReadDevice(0, image_.size()), want);
  // The target holds the whole of chunk 4 (the rest of it from the store).
  Bytes in_file(kChunk);
  auto r = env_->OpenReadable(target_);
  CAIRN_ASSERT_OK(r);
  CAIRN_ASSERT_OK((*r)->ReadAt(4 * kChunk, in_file));
  EXPECT_EQ(in_file, Slice(want, 4 * kChunk, kChunk));
}

TEST_F(InstantDeviceTest, AClientWriteAfterTheRestoreLandsInTheTarget) {
  CAIRN_ASSERT_OK(device_->gate().Opened(0, target_, true));
  EXPECT_TRUE(RestoreChunk(1));
  Bytes w = RandomBytes(kChunk + 10, 8);  // chunk 1 to the start of chunk 2
  CAIRN_ASSERT_OK(device_->Write(kChunk, w));
  EXPECT_FALSE(RestoreChunk(2));  // chunk 2 was completed by the client's write
  EXPECT_EQ(ReadDevice(kChunk, w.size()), w);
  EXPECT_EQ(ReadDevice(2 * kChunk + 10, 100), Slice(image_, 2 * kChunk + 10, 100));
}

TEST_F(InstantDeviceTest, ADamagedChunkFailsReadsAndWritesThatNeedItFromTheStore) {
  source_.Corrupt(reader_->map().Id(3));
  CAIRN_ASSERT_OK(device_->gate().Opened(0, target_, true));
  Bytes b(100);
  EXPECT_EQ(device_->Read(3 * kChunk, b).code(), StatusCode::kDataLoss);
  EXPECT_EQ(device_->Write(3 * kChunk, b).code(), StatusCode::kDataLoss);
  CAIRN_EXPECT_OK(device_->Read(4 * kChunk, b));
}

}  // namespace
}  // namespace cairn::access
