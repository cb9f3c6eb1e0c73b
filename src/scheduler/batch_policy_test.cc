#include "scheduler/batch_policy.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::microseconds;
using Kind = BatchDecision::Kind;

// Builds snapshots against a manual clock: every request is enqueued "now" unless told otherwise.
class DecideBatchTest : public ::testing::Test {
 protected:
  QueuedRequest Request(int64_t batch_size = 1, std::string_view key = "a",
                        std::optional<SteadyTime> deadline = std::nullopt) {
    return {.batch_size = batch_size, .batch_key = key, .enqueued = clock_.Now(), .deadline = deadline};
  }
  BatchDecision Decide() { return DecideBatch(snapshot_, clock_.Now(), options_); }

  ManualClock clock_{SteadyTime(std::chrono::seconds(100))};
  QueueSnapshot snapshot_;
  BatchPolicyOptions options_{.dynamic_batching = true, .max_batch_size = 8, .max_queue_delay = microseconds(100)};
};

TEST_F(DecideBatchTest, EmptyQueueIsIdle) { EXPECT_EQ(Decide().kind, Kind::kIdle); }

TEST_F(DecideBatchTest, WithoutDynamicBatchingRunsOneRequestAtOnce) {
  options_ = {};
  snapshot_.requests = {Request(), Request(), Request()};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 1u);
}

TEST_F(DecideBatchTest, WaitsForTheDelayThenRunsWhatIsQueued) {
  snapshot_.requests = {Request()};
  const SteadyTime first = clock_.Now();
  clock_.Advance(microseconds(30));
  snapshot_.requests.push_back(Request(2));
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kWait);
  EXPECT_EQ(d.wait_until, first + microseconds(100));  // the oldest request's delay, not the newest's

  clock_.Advance(microseconds(69));
  EXPECT_EQ(Decide().kind, Kind::kWait);
  clock_.Advance(microseconds(1));
  d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
}

TEST_F(DecideBatchTest, ZeroDelayRunsAtOnce) {
  options_.max_queue_delay = microseconds(0);
  snapshot_.requests = {Request(), Request()};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
}

TEST_F(DecideBatchTest, FullBatchRunsAtOnceAndLeavesTheRest) {
  snapshot_.requests = {Request(3), Request(3), Request(2), Request(1)};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 3u);  // 3 + 3 + 2 = 8 = max_batch_size
}

TEST_F(DecideBatchTest, ARequestThatDoesNotFitEndsTheBatch) {
  snapshot_.requests = {Request(3), Request(3), Request(4)};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
}

TEST_F(DecideBatchTest, DifferentShapesAreNeverJoined) {
  snapshot_.requests = {Request(1, "a"), Request(1, "b"), Request(1, "a")};
  BatchDecision d = Decide();
  // The batch of the head cannot grow (the next request differs, and nothing overtakes it): it runs alone now.
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 1u);

  snapshot_.requests = {Request(1, "b"), Request(1, "a")};
  d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 1u);
}

TEST_F(DecideBatchTest, PreferredBatchSizeRunsAtOnce) {
  options_.preferred_batch_sizes = {4};
  options_.max_queue_delay = std::chrono::seconds(10);
  snapshot_.requests = {Request(), Request(), Request()};
  EXPECT_EQ(Decide().kind, Kind::kWait);
  snapshot_.requests.push_back(Request());
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 4u);
}

TEST_F(DecideBatchTest, OnlyTheLargestPreferredSizeEndsTheWait) {
  options_.preferred_batch_sizes = {2, 4};
  snapshot_.requests = {Request(), Request()};
  EXPECT_EQ(Decide().kind, Kind::kWait);
  snapshot_.requests.push_back(Request());
  EXPECT_EQ(Decide().kind, Kind::kWait);
  // When the delay runs out, the batch is cut to its longest prefix of a preferred size.
  clock_.Advance(microseconds(100));
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
}

TEST_F(DecideBatchTest, WithoutAPreferredPrefixTheWholeBatchRuns) {
  options_.preferred_batch_sizes = {4};
  options_.max_queue_delay = microseconds(0);
  snapshot_.requests = {Request(3), Request(2)};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
}

TEST_F(DecideBatchTest, NeverWaitsPastADeadlineInTheBatch) {
  snapshot_.requests = {Request(), Request(1, "a", clock_.Now() + microseconds(50))};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 2u);
  // A deadline after the delay does not hurry the batch.
  snapshot_.requests = {Request(), Request(1, "a", clock_.Now() + microseconds(500))};
  EXPECT_EQ(Decide().kind, Kind::kWait);
}

TEST_F(DecideBatchTest, AHeadLargerThanTheMaximumRunsAlone) {
  snapshot_.requests = {Request(9), Request(1)};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 1u);
}

TEST_F(DecideBatchTest, BatchCapActsAsTheMaximum) {
  options_.batch_cap = 4;
  options_.max_queue_delay = std::chrono::seconds(10);
  snapshot_.requests = {Request(), Request(), Request()};
  EXPECT_EQ(Decide().kind, Kind::kWait);  // below the cap, the batch may still grow
  snapshot_.requests = {Request(), Request(2), Request(), Request(), Request()};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);  // full at the cap: runs at once, the rest stays queued
  EXPECT_EQ(d.count, 3u);
  snapshot_.requests = {Request(3), Request(2)};
  d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);  // the next request does not fit under the cap
  EXPECT_EQ(d.count, 1u);
}

TEST_F(DecideBatchTest, AHeadLargerThanTheCapRunsAlone) {
  options_.batch_cap = 2;
  snapshot_.requests = {Request(3), Request(1)};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);
  EXPECT_EQ(d.count, 1u);
}

TEST_F(DecideBatchTest, ACapAboveTheMaximumOrZeroChangesNothing) {
  snapshot_.requests = {Request(3), Request(3), Request(2), Request(1)};
  for (int64_t cap : {0, 8, 64}) {
    options_.batch_cap = cap;
    BatchDecision d = Decide();
    EXPECT_EQ(d.kind, Kind::kRun) << cap;
    EXPECT_EQ(d.count, 3u) << cap;  // 3 + 3 + 2 = 8 = max_batch_size
  }
}

TEST_F(DecideBatchTest, ACappedBatchIsStillCutToAPreferredSize) {
  options_.preferred_batch_sizes = {2, 8};
  options_.batch_cap = 3;
  snapshot_.requests = {Request(), Request(), Request(), Request()};
  BatchDecision d = Decide();
  EXPECT_EQ(d.kind, Kind::kRun);  // 3 items fill the cap; the longest preferred prefix is 2
  EXPECT_EQ(d.count, 2u);
}

TEST(BatchPolicyOptionsTest, FromConfig) {
  ModelConfig config;
  config.max_batch_size = 8;
  EXPECT_FALSE(BatchPolicyOptions::FromConfig(config).dynamic_batching);
  config.dynamic_batching = DynamicBatchingConfig{.preferred_batch_size = {8, 2, 16, 2}, .max_queue_delay_us = 250};
  BatchPolicyOptions options = BatchPolicyOptions::FromConfig(config);
  EXPECT_TRUE(options.dynamic_batching);
  EXPECT_EQ(options.max_batch_size, 8);
  EXPECT_EQ(options.preferred_batch_sizes, (std::vector<int64_t>{2, 8}));  // sorted, deduplicated, in range
  EXPECT_EQ(options.max_queue_delay, microseconds(250));
  EXPECT_EQ(options.batch_cap, 0);  // the scheduler's, never the config's
  config.max_batch_size = 0;
  EXPECT_FALSE(BatchPolicyOptions::FromConfig(config).dynamic_batching);
}

}  // namespace
}  // namespace weft
