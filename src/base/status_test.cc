#include "base/status.h"

#include <gtest/gtest.h>

#include "base/result.h"

namespace weft {
namespace {

Result<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgument("not positive: " + std::to_string(x));
  return x;
}

Result<int> Twice(int x) {
  WEFT_ASSIGN_OR_RETURN(int v, ParsePositive(x));
  return 2 * v;
}

TEST(StatusTest, OkIsDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = NotFound("model 'x'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model 'x'");
  EXPECT_EQ(s.WithContext("load").message(), "load: model 'x'");
  EXPECT_TRUE(Status().WithContext("ignored").ok());
}

TEST(StatusTest, RetryAfterTravelsWithContext) {
  using std::chrono::milliseconds;
  Status s = Unavailable("breaker open").WithRetryAfter(milliseconds(2500));
  EXPECT_EQ(s.retry_after(), milliseconds(2500));
  EXPECT_EQ(s.WithContext("model 'm'").retry_after(), milliseconds(2500));
  EXPECT_EQ(s.WithContext("model 'm'").code(), StatusCode::kUnavailable);
  EXPECT_EQ(Unavailable("x").retry_after(), milliseconds(0));
  EXPECT_TRUE(Status().WithRetryAfter(milliseconds(1)).ok());
  EXPECT_EQ(OutOfMemory("cuda").ToString(), "OUT_OF_MEMORY: cuda");
}

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*Twice(3), 6);
  auto r = Twice(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "not positive: -1");
}

}  // namespace
}  // namespace weft
