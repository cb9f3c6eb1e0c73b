#include "base/checked_math.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace weft {
namespace {

TEST(CheckedMathTest, OverflowIsNulloptNotAWrappedNumber) {
  EXPECT_EQ(CheckedMul<uint64_t>(4, (uint64_t{1} << 62) + 2), std::nullopt);  // would wrap to 8
  EXPECT_EQ(CheckedMul<uint64_t>(4, uint64_t{1} << 61), uint64_t{1} << 63);
  EXPECT_EQ(CheckedMul<int64_t>(-2, std::numeric_limits<int64_t>::min()), std::nullopt);
  EXPECT_EQ(CheckedAdd<uint64_t>(std::numeric_limits<uint64_t>::max(), 1), std::nullopt);
  EXPECT_EQ(CheckedAdd<int64_t>(40, 2), 42);
}

TEST(CheckedMathTest, ProductOfAShape) {
  EXPECT_EQ(CheckedProduct(std::vector<int64_t>{}), 1);
  EXPECT_EQ(CheckedProduct(std::vector<int64_t>{2, 3, 7}), 42);
  EXPECT_EQ(CheckedProduct(std::vector<int64_t>{0, std::numeric_limits<int64_t>::max()}), 0);
  EXPECT_EQ(CheckedProduct(std::vector<int64_t>{1LL << 40, 1LL << 40}), std::nullopt);
  EXPECT_EQ(CheckedProduct(std::vector<int64_t>{4, -1}), std::nullopt);
}

}  // namespace
}  // namespace weft
