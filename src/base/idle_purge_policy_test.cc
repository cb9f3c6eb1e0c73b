#include "base/idle_purge_policy.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr size_t kMiB = size_t{1} << 20;

class IdlePurgePolicyTest : public ::testing::Test {
 protected:
  bool Observe(uint64_t large_allocations, size_t dirty_bytes) {
    return policy_.Observe({large_allocations, dirty_bytes}, clock_.Now());
  }
  ManualClock clock_;
  IdlePurgePolicy policy_{seconds(10), 16 * kMiB, 1024 * kMiB};
};

TEST_F(IdlePurgePolicyTest, KeepsPagesWhileLargeAllocationsGoOn) {
  for (uint64_t n = 1; n <= 60; ++n) {
    EXPECT_FALSE(Observe(n * 3, 500 * kMiB)) << "second " << n;
    clock_.Advance(seconds(1));
  }
}

TEST_F(IdlePurgePolicyTest, PurgesOnceLargeAllocationsHaveStoppedForTheQuietTime) {
  EXPECT_FALSE(Observe(7, 200 * kMiB));
  clock_.Advance(seconds(9));
  EXPECT_FALSE(Observe(7, 200 * kMiB));
  clock_.Advance(milliseconds(999));
  EXPECT_FALSE(Observe(7, 200 * kMiB));
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(Observe(7, 200 * kMiB));
}

TEST_F(IdlePurgePolicyTest, ANewLargeAllocationRestartsTheQuietTime) {
  EXPECT_FALSE(Observe(7, 200 * kMiB));
  clock_.Advance(seconds(9));
  EXPECT_FALSE(Observe(8, 200 * kMiB));
  clock_.Advance(seconds(9));
  EXPECT_FALSE(Observe(8, 200 * kMiB));
  clock_.Advance(seconds(1));
  EXPECT_TRUE(Observe(8, 200 * kMiB));
}

TEST_F(IdlePurgePolicyTest, LeavesAFewDirtyPagesAlone) {
  EXPECT_FALSE(Observe(7, 16 * kMiB - 1));
  clock_.Advance(seconds(60));
  EXPECT_FALSE(Observe(7, 16 * kMiB - 1));
  EXPECT_TRUE(Observe(7, 16 * kMiB));
}

TEST_F(IdlePurgePolicyTest, PurgesAtOnceWhenTooMuchIsHeldEvenUnderLoad) {
  EXPECT_FALSE(Observe(1, 1023 * kMiB));
  EXPECT_TRUE(Observe(2, 1024 * kMiB));
  EXPECT_FALSE(Observe(3, 10 * kMiB));
}

TEST_F(IdlePurgePolicyTest, AfterAPurgeTheNextOneWaitsForPagesToBeHeldAgain) {
  EXPECT_FALSE(Observe(7, 200 * kMiB));
  clock_.Advance(seconds(10));
  EXPECT_TRUE(Observe(7, 200 * kMiB));
  clock_.Advance(seconds(1));
  EXPECT_FALSE(Observe(7, 0));
  clock_.Advance(seconds(30));
  EXPECT_FALSE(Observe(7, kMiB));
}

}  // namespace
}  // namespace weft
