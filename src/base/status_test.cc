#include "base/status.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace cairn {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  CAIRN_ASSIGN_OR_RETURN(int h, Half(x));
  CAIRN_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = DataLossError("chunk 3f: CRC mismatch");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_EQ(s.ToString(), "DataLoss: chunk 3f: CRC mismatch");
  EXPECT_EQ(s.WithContext("verify").message(), "verify: chunk 3f: CRC mismatch");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoToStatus(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "write x").code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ErrnoToStatus(ENOSPC, "write x").message().find("write x"), std::string::npos);
}

}  // namespace
}  // namespace cairn
