#include "loadgen/arrival_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace weft {
namespace {

using std::chrono::nanoseconds;

TEST(ArrivalScheduleTest, ConstantIsEvenlySpacedWithoutDrift) {
  ArrivalSchedule schedule({.rate_per_s = 3, .arrivals = Arrivals::kConstant});
  EXPECT_EQ(schedule.Next(), nanoseconds(0));
  EXPECT_EQ(schedule.Next(), nanoseconds(333'333'333));
  EXPECT_EQ(schedule.Next(), nanoseconds(666'666'667));
  for (int i = 3; i < 3000; ++i) schedule.Next();
  EXPECT_EQ(schedule.Next(), nanoseconds(1'000'000'000'000));  // the 3000th: exactly 1000 s, no accumulated error
}

TEST(ArrivalScheduleTest, PhasesInterleaveIntoOneEvenSchedule) {
  // Two workers at 50/s each, phases 0 and 1/100 s: together every 10 ms.
  ArrivalSchedule a({.rate_per_s = 50, .phase = nanoseconds(0)});
  ArrivalSchedule b({.rate_per_s = 50, .phase = nanoseconds(10'000'000)});
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(a.Next(), nanoseconds(20'000'000LL * i));
    EXPECT_EQ(b.Next(), nanoseconds(20'000'000LL * i + 10'000'000));
  }
}

TEST(ArrivalScheduleTest, PoissonHasTheRequestedMeanRateAndExponentialGaps) {
  const double rate = 200;
  ArrivalSchedule schedule({.rate_per_s = rate, .arrivals = Arrivals::kPoisson, .seed = 42});
  const int n = 100000;
  nanoseconds previous(0), last(0);
  double sum_sq = 0;
  int shorter_than_mean = 0;
  for (int i = 0; i < n; ++i) {
    last = schedule.Next();
    ASSERT_GE(last, previous);
    double gap = static_cast<double>((last - previous).count()) / 1e9;
    sum_sq += gap * gap;
    if (gap < 1 / rate) ++shorter_than_mean;
    previous = last;
  }
  double measured_rate = n / (static_cast<double>(last.count()) / 1e9);
  EXPECT_NEAR(measured_rate, rate, 0.02 * rate);
  // Exponential gaps: the variance equals the squared mean, and P(gap < mean) = 1 - 1/e.
  double mean = 1 / rate;
  EXPECT_NEAR(sum_sq / n - mean * mean, mean * mean, 0.05 * mean * mean);
  EXPECT_NEAR(static_cast<double>(shorter_than_mean) / n, 1 - std::exp(-1.0), 0.01);
}

TEST(ArrivalScheduleTest, PoissonRepeatsForASeedAndDiffersAcrossSeeds) {
  ArrivalSchedule a({.rate_per_s = 10, .arrivals = Arrivals::kPoisson, .seed = 1});
  ArrivalSchedule b({.rate_per_s = 10, .arrivals = Arrivals::kPoisson, .seed = 1});
  ArrivalSchedule c({.rate_per_s = 10, .arrivals = Arrivals::kPoisson, .seed = 2});
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    auto x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs = differs || x != c.Next();
  }
  EXPECT_TRUE(differs);
}

}  // namespace
}  // namespace weft
