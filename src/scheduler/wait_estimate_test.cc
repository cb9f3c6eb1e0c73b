#include "scheduler/wait_estimate.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST(WaitEstimateTest, NothingMeasuredEstimatesNothing) {
  EXPECT_EQ(ExpectedLatency({.queued = 1000, .instances = 1}), nanoseconds(0));
  EXPECT_EQ(ExpectedLatency({.queued = 1000, .instances = 1, .mean_batch = 4}), nanoseconds(0));
}

TEST(WaitEstimateTest, AnIdleModelTakesOneExecution) {
  LoadSnapshot load{.queued = 0, .instances = 2, .running = 0, .mean_batch = 4, .mean_execution = milliseconds(10)};
  EXPECT_EQ(ExpectedLatency(load), milliseconds(10));
  load.running = 1;  // one instance is still free
  EXPECT_EQ(ExpectedLatency(load), milliseconds(10));
  load.running = 2;  // both busy: half an execution left on average
  EXPECT_EQ(ExpectedLatency(load), milliseconds(15));
}

TEST(WaitEstimateTest, TheQueueDrainsAFullRoundOfBatchesAtATime) {
  // 2 instances of 4 items per batch: 8 items per round of 10 ms.
  LoadSnapshot load{.queued = 7, .instances = 2, .running = 0, .mean_batch = 4, .mean_execution = milliseconds(10)};
  EXPECT_EQ(ExpectedLatency(load), milliseconds(10));  // joins the round with the 7 ahead
  load.queued = 8;
  EXPECT_EQ(ExpectedLatency(load), milliseconds(20));
  load.queued = 80;
  EXPECT_EQ(ExpectedLatency(load), milliseconds(110));
}

TEST(WaitEstimateTest, AMeanUnderOneRequestCountsAsOne) {
  LoadSnapshot load{.queued = 3, .instances = 1, .running = 0, .mean_batch = 0.2, .mean_execution = milliseconds(1)};
  EXPECT_EQ(ExpectedLatency(load), milliseconds(4));
}

TEST(WaitEstimateTest, AHugeQueueIsCappedAtADay) {
  LoadSnapshot load{
      .queued = UINT64_MAX, .instances = 1, .running = 0, .mean_batch = 1, .mean_execution = std::chrono::hours(1)};
  EXPECT_EQ(ExpectedLatency(load), std::chrono::hours(24));
}

TEST(WaitEstimateTest, UpdateMeanTakesTheFirstSampleThenMovesByItsWeight) {
  EXPECT_EQ(UpdateMean(0, 10, 0.1), 10);
  EXPECT_DOUBLE_EQ(UpdateMean(10, 20, 0.1), 11);
  EXPECT_DOUBLE_EQ(UpdateMean(10, 0, 0.5), 5);
}

}  // namespace
}  // namespace weft
