#include "base/fault_injection_env.h"

#include <gtest/gtest.h>

#include "tests/unit_test_util.h"

namespace cairn {
namespace {

using test_util::CodeOf;

class FaultInjectionEnvTest : public ::testing::Test {
 protected:
  std::unique_ptr<Env> posix_ = NewPosixEnv();
  FaultInjectionEnv env_{posix_.get()};
  test_util::TempDir dir_;
};

TEST_F(FaultInjectionEnvTest, WriteBudgetRunsOutWithResourceExhausted) {
  env_.SetWriteBudget(100);
  std::string path = dir_.Join("full");
  auto f = env_.OpenWritable(path, OpenMode::kCreateNew);
  CAIRN_ASSERT_OK(f);
  Bytes sixty(60, 'a');
  Bytes forty(40, 'b');
  CAIRN_ASSERT_OK((*f)->WriteAt(0, sixty));
  CAIRN_ASSERT_OK((*f)->WriteAt(60, forty));  // exactly the budget
  EXPECT_EQ(env_.bytes_written(), 100u);

  Status s = (*f)->WriteAt(100, AsBytes("x"));
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("No space left"), std::string_view::npos) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string_view::npos) << s.ToString();
  EXPECT_EQ(CodeOf((*f)->Append(AsBytes("y"))), StatusCode::kResourceExhausted);  // Append too
  EXPECT_EQ(env_.bytes_written(), 100u);
  CAIRN_ASSERT_OK((*f)->Close());
  EXPECT_EQ(test_util::ReadFileOrFail(path).size(), 100u);  // the failed writes wrote nothing

  env_.SetWriteBudget(-1);  // disabled again
  auto g = env_.OpenWritable(dir_.Join("again"), OpenMode::kCreateNew);
  CAIRN_ASSERT_OK(g);
  CAIRN_EXPECT_OK((*g)->WriteAt(0, Bytes(1000, 'c')));
  EXPECT_EQ(env_.bytes_written(), 1100u);
}

TEST_F(FaultInjectionEnvTest, WriteLargerThanBudgetFailsWhole) {
  env_.SetWriteBudget(10);
  auto f = env_.OpenWritable(dir_.Join("big"), OpenMode::kCreateNew);
  CAIRN_ASSERT_OK(f);
  EXPECT_EQ(CodeOf((*f)->WriteAt(0, Bytes(11, 'z'))), StatusCode::kResourceExhausted);
  EXPECT_EQ(env_.bytes_written(), 0u);
  EXPECT_EQ(CodeOf(WriteFileAtomic(env_, dir_.Join("atomic"), Bytes(5, 'q'))),
            StatusCode::kResourceExhausted);  // the budget stays spent
}

TEST_F(FaultInjectionEnvTest, ReadFailurePatternMatchesPaths) {
  std::string bad = dir_.Join("chunk-bad");
  std::string good = dir_.Join("chunk-good");
  test_util::WriteFileOrFail(bad, AsBytes("bad bytes"));
  test_util::WriteFileOrFail(good, AsBytes("good bytes"));
  env_.FailReadsMatching("-bad");

  auto b = env_.OpenReadable(bad);
  CAIRN_ASSERT_OK(b);  // opening works; reading fails, like EIO
  Bytes buf(16);
  auto n = (*b)->ReadAt(0, buf);
  EXPECT_EQ(CodeOf(n), StatusCode::kDataLoss);
  EXPECT_NE(n.status().message().find(bad), std::string_view::npos);
  EXPECT_EQ(CodeOf(ReadWholeFile(env_, bad, 100)), StatusCode::kDataLoss);

  auto whole = ReadWholeFile(env_, good, 100);
  CAIRN_ASSERT_OK(whole);
  EXPECT_EQ(AsStringView(*whole), "good bytes");

  env_.FailReadsMatching("");
  auto healed = ReadWholeFile(env_, bad, 100);
  CAIRN_ASSERT_OK(healed);
  EXPECT_EQ(AsStringView(*healed), "bad bytes");
}

TEST_F(FaultInjectionEnvTest, ReadLatencyDelaysReads) {
  std::string path = dir_.Join("slow");
  test_util::WriteFileOrFail(path, AsBytes("slow"));
  env_.SetReadLatencyMicros(20000);
  int64_t start = posix_->NowMonotonicNanos();
  auto data = ReadWholeFile(env_, path, 10);
  int64_t elapsed = posix_->NowMonotonicNanos() - start;
  CAIRN_ASSERT_OK(data);
  EXPECT_GE(elapsed, 20'000'000);
}

TEST_F(FaultInjectionEnvTest, WriteLatencyDelaysWrites) {
  env_.SetWriteLatencyMicros(20000);
  auto file = env_.OpenWritable(dir_.Join("slow"), OpenMode::kTruncate);
  CAIRN_ASSERT_OK(file);
  int64_t start = posix_->NowMonotonicNanos();
  CAIRN_ASSERT_OK((*file)->WriteAt(0, AsBytes("slow")));
  EXPECT_GE(posix_->NowMonotonicNanos() - start, 20'000'000);
  CAIRN_ASSERT_OK((*file)->Close());
}

TEST_F(FaultInjectionEnvTest, OtherCallsPassThrough) {
  CAIRN_ASSERT_OK(env_.CreateDir(dir_.Join("d")));
  auto info = posix_->Stat(dir_.Join("d"));
  CAIRN_ASSERT_OK(info);
  EXPECT_TRUE(info->is_dir);
  EXPECT_EQ(CodeOf(env_.OpenReadable(dir_.Join("none"))), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn
