// ApplyCallDeadline: a call's deadline (gRPC's raw gpr_timespec) becomes the request's, clamped to a year.
#include <grpc/support/time.h>
#include <gtest/gtest.h>

#include <chrono>
#include <limits>

#include "frontend/grpc/stream_infer.h"

namespace weft {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

gpr_timespec SecondsFromNow(int64_t s) {
  gpr_timespec now = gpr_now(GPR_CLOCK_REALTIME);
  now.tv_sec += s;
  return now;
}

std::chrono::nanoseconds LeftOf(const InferenceRequest& request) {
  return *request.deadline - std::chrono::steady_clock::now();
}

TEST(CallDeadlineTest, AnInfiniteDeadlineLeavesTheRequestsAlone) {
  InferenceRequest request;
  ApplyCallDeadline(gpr_inf_future(GPR_CLOCK_REALTIME), &request);
  EXPECT_FALSE(request.deadline);
  ApplyCallDeadline(gpr_inf_future(GPR_CLOCK_MONOTONIC), &request);
  EXPECT_FALSE(request.deadline);
}

TEST(CallDeadlineTest, ANearDeadlineIsKept) {
  InferenceRequest request;
  ApplyCallDeadline(SecondsFromNow(10), &request);
  ASSERT_TRUE(request.deadline);
  EXPECT_GT(LeftOf(request), seconds(8));
  EXPECT_LE(LeftOf(request), seconds(10));
  // The earlier of the request's own deadline and the call's wins.
  ApplyCallDeadline(SecondsFromNow(100), &request);
  EXPECT_LE(LeftOf(request), seconds(10));
}

// grpc-timeout 2562047H ("no deadline" from Go clients) and beyond: gRPC's own conversion to a time_point multiplied
// these seconds into nanoseconds and overflowed. They count as a year.
TEST(CallDeadlineTest, DeadlinesCenturiesAwayCountAsAYear) {
  for (int64_t s : {int64_t{2562047} * 3600, int64_t{1} << 40, std::numeric_limits<int64_t>::max() / 2}) {
    InferenceRequest request;
    ApplyCallDeadline(SecondsFromNow(s), &request);
    ASSERT_TRUE(request.deadline) << s;
    EXPECT_GT(LeftOf(request), hours(24 * 364)) << s;
    EXPECT_LE(LeftOf(request), hours(24 * 365)) << s;
  }
}

TEST(CallDeadlineTest, APastDeadlineIsInThePast) {
  InferenceRequest request;
  ApplyCallDeadline(SecondsFromNow(-5), &request);
  ASSERT_TRUE(request.deadline);
  EXPECT_LT(LeftOf(request), seconds(-4));
  InferenceRequest ancient;
  ApplyCallDeadline(gpr_timespec{std::numeric_limits<int64_t>::min() / 2, 0, GPR_CLOCK_REALTIME}, &ancient);
  ASSERT_TRUE(ancient.deadline);
  EXPECT_LT(LeftOf(ancient), hours(-24 * 364));
}

}  // namespace
}  // namespace weft
