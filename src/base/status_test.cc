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

TEST(ResultTest, PropagatesErrors) {
  EXPECT_EQ(*Twice(3), 6);
  auto r = Twice(-1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "not positive: -1");
}

}  // namespace
}  // namespace weft
