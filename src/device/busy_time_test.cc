#include "device/busy_time.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

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

// Intervals in random order and overlap, against a millisecond bitmap: the merged set covers the same instants.
TEST(BusyTimeTest, RandomIntervalsCoverWhatABitmapCovers) {
  std::mt19937 random(7);
  for (int round = 0; round < 50; ++round) {
    BusyTime busy;
    std::vector<bool> bitmap(400, false);
    for (int i = 0; i < 40; ++i) {
      const int start = static_cast<int>(random() % 380);
      const int length = static_cast<int>(random() % 20);
      busy.Add(At(start), At(start + length));
      for (int ms = start; ms < start + length; ++ms) bitmap[ms] = true;
      const int from = static_cast<int>(random() % 400);
      const int to = from + static_cast<int>(random() % (400 - from + 1));
      int expected = 0;
      for (int ms = from; ms < to; ++ms) expected += bitmap[ms] ? 1 : 0;
      ASSERT_EQ(busy.Covered(At(from), At(to)), milliseconds(expected)) << "round " << round << " add " << i;
    }
    EXPECT_EQ(busy.total(), milliseconds(std::count(bitmap.begin(), bitmap.end(), true)));
  }
}

}  // namespace
}  // namespace weft
