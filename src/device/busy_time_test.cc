#include "device/busy_time.h"

#include <gtest/gtest.h>

namespace weft {
namespace {

using std::chrono::milliseconds;

SteadyTime At(int ms) { return SteadyTime{} + std::chrono::seconds(100) + milliseconds(ms); }

TEST(BusyTimeTest, OverlappingIntervalsCountOnce) {
  BusyTime busy;
  busy.Add(At(0), At(10));
  busy.Add(At(5), At(15));
  busy.Add(At(20), At(30));
  EXPECT_EQ(busy.Covered(At(0), At(100)), milliseconds(25));
  EXPECT_EQ(busy.total(), milliseconds(25));
  EXPECT_EQ(busy.intervals(), 2u);
  EXPECT_DOUBLE_EQ(busy.Fraction(At(0), At(100)), 0.25);
}

TEST(BusyTimeTest, OutOfOrderAndTouchingIntervalsMerge) {
  BusyTime busy;
  busy.Add(At(20), At(30));
  busy.Add(At(0), At(10));
  busy.Add(At(10), At(20));  // touches both: one interval remains
  EXPECT_EQ(busy.intervals(), 1u);
  EXPECT_EQ(busy.total(), milliseconds(30));
  busy.Add(At(2), At(28));  // inside: adds nothing
  EXPECT_EQ(busy.total(), milliseconds(30));
  busy.Add(At(-5), At(40));  // swallows it
  EXPECT_EQ(busy.total(), milliseconds(45));
  EXPECT_EQ(busy.intervals(), 1u);
}

TEST(BusyTimeTest, CoveredClipsToTheWindow) {
  BusyTime busy;
  busy.Add(At(0), At(10));
  busy.Add(At(20), At(30));
  EXPECT_EQ(busy.Covered(At(5), At(25)), milliseconds(10));
  EXPECT_EQ(busy.Covered(At(10), At(20)), milliseconds(0));
  EXPECT_EQ(busy.Covered(At(25), At(5)), milliseconds(0));
  EXPECT_DOUBLE_EQ(busy.Fraction(At(5), At(5)), 0);
}

TEST(BusyTimeTest, OldIntervalsAreDroppedButStayInTheTotal) {
  BusyTime busy(milliseconds(100));
  busy.Add(At(0), At(10));
  busy.Add(At(500), At(510));
  EXPECT_EQ(busy.intervals(), 1u);
  EXPECT_EQ(busy.Covered(At(0), At(20)), milliseconds(0));
  EXPECT_EQ(busy.total(), milliseconds(20));
}

TEST(BusyTimeTest, EmptyIntervalsAreIgnored) {
  BusyTime busy;
  busy.Add(At(5), At(5));
  busy.Add(At(6), At(5));
  EXPECT_EQ(busy.intervals(), 0u);
  EXPECT_EQ(busy.total(), milliseconds(0));
}

}  // namespace
}  // namespace weft
