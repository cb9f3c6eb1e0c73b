#include "scheduler/byte_budget.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace weft {
namespace {

TEST(ByteBudgetTest, TakesWhatFitsAndGivesItBack) {
  ByteBudget budget(100);
  EXPECT_TRUE(budget.TryAcquire(60));
  EXPECT_FALSE(budget.TryAcquire(41));
  EXPECT_EQ(budget.used(), 60u);
  EXPECT_TRUE(budget.TryAcquire(40));
  budget.Release(60);
  EXPECT_EQ(budget.used(), 40u);
  EXPECT_FALSE(budget.TryAcquire(1000));
}

TEST(ByteBudgetTest, ReservationsGiveBackOnDestruction) {
  ByteBudget budget(10);
  {
    std::optional<ByteReservation> r = budget.TryReserve(8);
    ASSERT_TRUE(r);
    EXPECT_FALSE(budget.TryReserve(3));
    ByteReservation moved = std::move(*r);
    EXPECT_EQ(moved.bytes(), 8u);
    EXPECT_EQ(budget.used(), 8u);
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(ByteBudgetTest, NeverOvercommitsUnderContention) {
  ByteBudget budget(1000);
  std::atomic<int> failures{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (budget.TryAcquire(300)) {
          EXPECT_LE(budget.used(), 1000u);
          budget.Release(300);
        } else {
          failures++;
        }
      }
    });
  }
  threads.clear();
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
}  // namespace weft
