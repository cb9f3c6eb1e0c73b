#include "frontend/http/unsent_bytes.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

TEST(UnsentBytesTest, RefusesWhatWouldGoPastTheBoundExceptSmallOrLoneResponses) {
  UnsentBytes unsent(100, 10);
  EXPECT_TRUE(unsent.TryReserve(60));
  EXPECT_FALSE(unsent.TryReserve(50));  // 110 > 100
  EXPECT_TRUE(unsent.TryReserve(40));   // exactly at the bound
  EXPECT_TRUE(unsent.Saturated());
  EXPECT_FALSE(unsent.TryReserve(11));
  EXPECT_TRUE(unsent.TryReserve(10));  // small: always
  EXPECT_EQ(unsent.held(), 110u);
  unsent.Release(110);
  EXPECT_FALSE(unsent.Saturated());
  // Alone, a response larger than the bound still goes out; nothing else large does meanwhile.
  EXPECT_TRUE(unsent.TryReserve(500));
  EXPECT_FALSE(unsent.TryReserve(20));
  unsent.Release(500);
  EXPECT_EQ(unsent.held(), 0u);

  UnsentBytes unbounded(0, 10);
  EXPECT_TRUE(unbounded.TryReserve(size_t{1} << 40));
  EXPECT_TRUE(unbounded.TryReserve(size_t{1} << 40));
  EXPECT_FALSE(unbounded.Saturated());
}

}  // namespace
}  // namespace weft
