#include "scheduler/batch_tuner.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

namespace weft {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// Cost per item in microseconds, by batch size.
using CostCurve = std::function<double(int64_t items)>;

// A model kept busy for `span` of manual time: every execution takes the cap, as a deep queue makes it, and costs
// what `curve` says. Returns the executions run at each size.
std::map<int64_t, int> RunBusy(BatchTuner& tuner, SteadyTime* now, SteadyTime::duration span, const CostCurve& curve) {
  std::map<int64_t, int> runs;
  const SteadyTime end = *now + span;
  while (*now < end) {
    const int64_t items = tuner.Cap(*now);
    const auto took = nanoseconds(static_cast<int64_t>(curve(items) * 1000 * static_cast<double>(items)));
    *now += took;
    tuner.Observe(items, took, *now);
    ++runs[items];
  }
  return runs;
}

// A convnet on a CPU: a batch of 8 overflows the caches and costs 2.5x per item; 2 is the cheapest.
double CacheBound(int64_t items) {
  switch (items) {
    case 1: return 1000;
    case 2: return 900;
    case 4: return 1500;
    default: return 2500;
  }
}

// A GPU: the larger the batch, the cheaper each item.
double Parallel(int64_t items) { return 8000.0 / static_cast<double>(items) + 100; }

TEST(BatchTunerTest, LadderIsPowersOfTwoThenTheMaximum) {
  BatchTuner tuner({.max_batch_size = 6});
  const SteadyTime t0{};
  for (int64_t items : {1, 2, 4, 6}) {
    for (int i = 0; i < 5; ++i) tuner.Observe(items, milliseconds(items), t0);
    EXPECT_EQ(tuner.CostPerItem(items), milliseconds(1)) << items;
  }
  EXPECT_FALSE(tuner.Observe(3, milliseconds(3), t0));  // off the ladder: not measured
  EXPECT_FALSE(tuner.CostPerItem(3));
  EXPECT_FALSE(tuner.CostPerItem(8));
}

TEST(BatchTunerTest, StartsAtTheMaximumAndWaitsBeforeTheFirstProbe) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  EXPECT_EQ(tuner.Cap(now), 8);
  tuner.Observe(8, milliseconds(20), now);
  now += milliseconds(1999);
  EXPECT_EQ(tuner.Cap(now), 8);
  EXPECT_FALSE(tuner.probing());
  now += milliseconds(1);
  tuner.Observe(8, milliseconds(20), now);
  EXPECT_EQ(tuner.Cap(now), 4);  // the only neighbour, never measured
  EXPECT_EQ(tuner.probing(), 4);
}

TEST(BatchTunerTest, DescendsToTheSizeThatCostsLeastPerItem) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  RunBusy(tuner, &now, seconds(20), CacheBound);
  EXPECT_EQ(tuner.chosen(), 2);
  // Once there, the probes of 1 and 4 every 30 s or so are a small share of the executions.
  const std::map<int64_t, int> runs = RunBusy(tuner, &now, seconds(120), CacheBound);
  EXPECT_EQ(tuner.chosen(), 2);
  int total = 0;
  for (const auto& [items, n] : runs) total += n;
  EXPECT_GT(runs.at(2), total * 95 / 100);
  EXPECT_EQ(runs.count(8), 0u);
}

TEST(BatchTunerTest, KeepsTheMaximumWhenLargerBatchesAreCheaper) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  const std::map<int64_t, int> runs = RunBusy(tuner, &now, seconds(120), Parallel);
  EXPECT_EQ(tuner.chosen(), 8);
  int total = 0;
  for (const auto& [items, n] : runs) total += n;
  // One probe of 8 executions at 4 every 30 s (the figure goes stale) against thousands at 8.
  EXPECT_LT(runs.at(4), total / 50);
  EXPECT_EQ(runs.count(2), 0u);
}

TEST(BatchTunerTest, ClimbsBackWhenTheCostsChange) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  RunBusy(tuner, &now, seconds(20), CacheBound);
  ASSERT_EQ(tuner.chosen(), 2);
  // Stale figures are measured again: 4, then 8, win now.
  RunBusy(tuner, &now, seconds(100), Parallel);
  EXPECT_EQ(tuner.chosen(), 8);
}

// Found in bench/batch_tuning_bench.sh: comparing the cap with every size's figure at every execution made the cap
// flap (64 moves in 8 minutes), taking figures measured under another load at their word.
TEST(BatchTunerTest, OnlyAFreshProbeMovesTheCap) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  RunBusy(tuner, &now, seconds(20), CacheBound);
  ASSERT_EQ(tuner.chosen(), 2);
  ASSERT_TRUE(tuner.CostPerItem(1));  // 1 ms per item, measured a few seconds ago
  // Every size now costs the same, three times what 1 cost: the old figure of 1 looks cheaper than 2 but is not.
  int moves = 0;
  const SteadyTime end = now + seconds(100);
  while (now < end) {
    const int64_t before = tuner.chosen();
    RunBusy(tuner, &now, milliseconds(100), [](int64_t) { return 3000.0; });
    moves += tuner.chosen() != before;
  }
  EXPECT_EQ(moves, 0);
  EXPECT_EQ(tuner.chosen(), 2);
}

TEST(BatchTunerTest, AProbeThatWinsByLessThanTheMarginDoesNotMove) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  // 4 is 3 % cheaper than 8: within the 5 % margin.
  RunBusy(tuner, &now, seconds(30), [](int64_t items) { return items == 4 ? 970.0 : items == 8 ? 1000.0 : 5000.0; });
  EXPECT_EQ(tuner.chosen(), 8);
  EXPECT_TRUE(tuner.CostPerItem(4));
}

TEST(BatchTunerTest, NoProbeWhileExecutionsDoNotFillTheCap) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  // A light load: single requests, never a full batch.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(tuner.Cap(now), 8);
    now += milliseconds(50);
    EXPECT_FALSE(tuner.Observe(1, milliseconds(1), now));
  }
  EXPECT_FALSE(tuner.probing());
  EXPECT_EQ(tuner.chosen(), 8);
}

TEST(BatchTunerTest, AProbeTheLoadCannotFillIsGivenUp) {
  BatchTuner tuner({.max_batch_size = 8});
  SteadyTime now{};
  tuner.Cap(now);
  now += seconds(2);
  tuner.Observe(8, milliseconds(20), now);
  ASSERT_EQ(tuner.Cap(now), 4);
  // The load stops; the probe's 8 executions never come.
  now += milliseconds(4999);
  EXPECT_EQ(tuner.Cap(now), 4);
  now += milliseconds(1);
  EXPECT_EQ(tuner.Cap(now), 8);
  EXPECT_FALSE(tuner.probing());
}

TEST(BatchTunerTest, ObserveSaysWhenTheCapMoves) {
  BatchTuner tuner({.max_batch_size = 2, .min_samples = 1, .probe_executions = 2});
  SteadyTime now{};
  tuner.Cap(now);
  now += seconds(2);
  EXPECT_FALSE(tuner.Observe(2, milliseconds(10), now));  // 5 ms per item at the cap: nothing to compare with
  ASSERT_EQ(tuner.Cap(now), 1);
  EXPECT_FALSE(tuner.Observe(1, milliseconds(1), now));  // the probe's first of two
  EXPECT_TRUE(tuner.Observe(1, milliseconds(1), now));   // its last: 1 ms per item wins
  EXPECT_EQ(tuner.chosen(), 1);
  EXPECT_FALSE(tuner.probing());
  EXPECT_EQ(tuner.Cap(now), 1);
}

}  // namespace
}  // namespace weft
