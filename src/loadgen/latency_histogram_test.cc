#include "loadgen/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "loadgen/deterministic_random.h"

namespace weft {
namespace {

using std::chrono::nanoseconds;

TEST(LatencyHistogramTest, EmptyReportsZeros) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.Percentile(0.5).count(), 0);
  EXPECT_EQ(h.min().count(), 0);
  EXPECT_EQ(h.max().count(), 0);
  EXPECT_EQ(h.mean().count(), 0);
}

TEST(LatencyHistogramTest, BucketsCoverEveryValueWithinOnePercent) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256}, uint64_t{257}, uint64_t{1000},
                     uint64_t{123456789}, uint64_t{1} << 40, (uint64_t{1} << 63) + 12345, UINT64_MAX}) {
    size_t b = LatencyHistogram::BucketOf(v);
    uint64_t low = LatencyHistogram::BucketLowest(b);
    uint64_t high = LatencyHistogram::BucketHighest(b);
    EXPECT_LE(low, v) << v;
    EXPECT_GE(high, v) << v;
    EXPECT_LE(static_cast<double>(high - low), 0.01 * static_cast<double>(low) + 1) << v;
  }
  // Adjacent buckets tile the line.
  for (size_t b = 0; b + 1 < LatencyHistogram::BucketOf(UINT64_MAX); ++b) {
    ASSERT_EQ(LatencyHistogram::BucketHighest(b) + 1, LatencyHistogram::BucketLowest(b + 1)) << b;
  }
}

TEST(LatencyHistogramTest, SmallValuesAreExact) {
  LatencyHistogram h;
  for (int v = 1; v <= 100; ++v) h.Record(nanoseconds(v));
  EXPECT_EQ(h.Percentile(0.5).count(), 50);
  EXPECT_EQ(h.Percentile(0.9).count(), 90);
  EXPECT_EQ(h.Percentile(0.99).count(), 99);
  EXPECT_EQ(h.Percentile(1.0).count(), 100);
  EXPECT_EQ(h.Percentile(0).count(), 1);
  EXPECT_EQ(h.mean().count(), 51);  // 50.5 rounded
}

// Against the exact order statistics of a sorted vector: every percentile within 1%.
TEST(LatencyHistogramTest, PercentilesMatchSortedSamples) {
  DeterministicRandom random(7);
  std::vector<int64_t> samples;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    // Log-uniform from 10 us to 1 s, the spread of real latencies.
    auto v = static_cast<int64_t>(std::exp(std::log(1e4) + random.NextUnit() * (std::log(1e9) - std::log(1e4))));
    samples.push_back(v);
    h.Record(nanoseconds(v));
  }
  std::sort(samples.begin(), samples.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    auto rank = static_cast<size_t>(std::ceil(q * samples.size()));
    double exact = static_cast<double>(samples[rank - 1]);
    EXPECT_NEAR(static_cast<double>(h.Percentile(q).count()), exact, 0.01 * exact) << q;
  }
  EXPECT_EQ(h.max().count(), samples.back());
  EXPECT_EQ(h.min().count(), samples.front());
  EXPECT_EQ(h.Percentile(1.0).count(), samples.back());
}

TEST(LatencyHistogramTest, PercentilesAreOrderedAndBoundedByMax) {
  LatencyHistogram h;
  h.Record(nanoseconds(1'000'000));
  h.Record(nanoseconds(1'000'001));
  h.Record(nanoseconds(5'000'000));
  auto p50 = h.Percentile(0.5), p90 = h.Percentile(0.9), p99 = h.Percentile(0.99), p999 = h.Percentile(0.999);
  EXPECT_LE(p50, p90);
  EXPECT_LE(p90, p99);
  EXPECT_LE(p99, p999);
  EXPECT_LE(p999, h.max());
  EXPECT_EQ(p999, h.max());  // the top order statistic of three is the max, exactly (clamped)
}

TEST(LatencyHistogramTest, MergeEqualsRecordingEverythingInOne) {
  LatencyHistogram a, b, all;
  for (int i = 1; i <= 1000; ++i) {
    (i % 3 ? a : b).Record(nanoseconds(i * 997));
    all.Record(nanoseconds(i * 997));
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), all.count());
  EXPECT_EQ(a.min(), all.min());
  EXPECT_EQ(a.max(), all.max());
  EXPECT_EQ(a.mean(), all.mean());
  for (double q : {0.1, 0.5, 0.9, 0.99, 0.999}) EXPECT_EQ(a.Percentile(q), all.Percentile(q)) << q;
}

TEST(LatencyHistogramTest, NegativeLatencyCountsAsZero) {
  LatencyHistogram h;
  h.Record(nanoseconds(-5));
  EXPECT_EQ(h.count(), 1u);
  EXPECT_EQ(h.max().count(), 0);
}

}  // namespace
}  // namespace weft
