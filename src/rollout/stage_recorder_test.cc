#include "rollout/stage_recorder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

namespace weft {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

const SteadyTime kStart = SteadyTime{} + std::chrono::hours(1);

// The upper edge of bucket i, in seconds.
double Edge(int bucket) { return std::exp2((bucket + 1) / 8.0) * 1e-6; }

TEST(LatencyRecorderTest, EmptyIsZero) {
  LatencyRecorder r;
  EXPECT_EQ(r.count(), 0u);
  EXPECT_EQ(r.Quantile(0.5), 0);
  EXPECT_EQ(r.Quantile(1), 0);
}

TEST(LatencyRecorderTest, QuantileIsTheUpperEdgeOfItsBucket) {
  LatencyRecorder r;
  r.Record(milliseconds(1));  // 1000 µs: 8 * log2(1000) = 79.7, bucket 79, edge 2^10 µs
  EXPECT_EQ(r.count(), 1u);
  EXPECT_DOUBLE_EQ(r.Quantile(0.5), Edge(79));
  EXPECT_DOUBLE_EQ(r.Quantile(0.5), 1024e-6);
}

TEST(LatencyRecorderTest, BucketsBoundEveryLatencyWithinAnEighthOfADoubling) {
  for (double micros : {1.0, 1.05, 1.5, 3.0, 10.0, 99.9, 1234.5, 65536.0, 1e6, 3.3e9}) {
    LatencyRecorder r;
    r.Record(nanoseconds(static_cast<int64_t>(micros * 1000)));
    const double q = r.Quantile(1) * 1e6;
    EXPECT_GT(q, micros * (1 - 1e-9)) << micros;
    EXPECT_LE(q, micros * std::exp2(1.0 / 8) * (1 + 1e-9)) << micros;
  }
}

TEST(LatencyRecorderTest, ExtremesAreClamped) {
  LatencyRecorder below;
  below.Record(nanoseconds(500));
  below.Record(nanoseconds(0));
  below.Record(nanoseconds(-5));
  EXPECT_DOUBLE_EQ(below.Quantile(1), Edge(0));
  LatencyRecorder above;
  above.Record(std::chrono::hours(3));
  EXPECT_DOUBLE_EQ(above.Quantile(1), Edge(255));  // 2^32 µs, about 71.6 minutes
}

TEST(LatencyRecorderTest, QuantilesByRank) {
  LatencyRecorder r;
  for (int i = 0; i < 98; ++i) r.Record(milliseconds(1));
  for (int i = 0; i < 2; ++i) r.Record(milliseconds(100));
  EXPECT_EQ(r.count(), 100u);
  EXPECT_DOUBLE_EQ(r.Quantile(0.5), Edge(79));
  EXPECT_DOUBLE_EQ(r.Quantile(0.98), Edge(79));  // rank 98
  const int slow = static_cast<int>(std::floor(8 * std::log2(100000.0)));
  EXPECT_DOUBLE_EQ(r.Quantile(0.99), Edge(slow));  // rank 99
  EXPECT_DOUBLE_EQ(r.Quantile(1), Edge(slow));
  // Out of range: the smallest and the largest.
  EXPECT_DOUBLE_EQ(r.Quantile(0), Edge(79));
  EXPECT_DOUBLE_EQ(r.Quantile(2), Edge(slow));
}

TEST(StageRecorderTest, AnswersPerArm) {
  StageRecorder r(kStart, 4);
  r.RecordAnswer(RolloutArm::kPrimary, false, milliseconds(1));
  r.RecordAnswer(RolloutArm::kPrimary, true, milliseconds(1));
  r.RecordAnswer(RolloutArm::kPrimary, false, milliseconds(100));
  r.RecordAnswer(RolloutArm::kCandidate, false, milliseconds(2));
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart + milliseconds(2500));
  EXPECT_EQ(f.elapsed, milliseconds(2500));
  EXPECT_EQ(f.primary.requests, 3u);
  EXPECT_EQ(f.primary.errors, 1u);
  EXPECT_DOUBLE_EQ(f.primary.p50_seconds, Edge(79));
  EXPECT_GE(f.primary.p99_seconds, 0.1);
  EXPECT_LT(f.primary.p99_seconds, 0.1 * 1.1);
  EXPECT_EQ(f.candidate.requests, 1u);
  EXPECT_EQ(f.candidate.errors, 0u);
  EXPECT_GE(f.candidate.p99_seconds, 0.002);
  EXPECT_EQ(r.start(), kStart);
}

TEST(StageRecorderTest, ElapsedIsNeverNegative) {
  StageRecorder r(kStart, 4);
  EXPECT_EQ(r.Snapshot(RolloutCriteria{}, kStart - milliseconds(5)).elapsed, nanoseconds(0));
}

TEST(StageRecorderTest, ShadowCopiesInFlightAreBounded) {
  StageRecorder r(kStart, 2);
  EXPECT_TRUE(r.TryStartShadow());
  EXPECT_TRUE(r.TryStartShadow());
  EXPECT_FALSE(r.TryStartShadow());
  EXPECT_FALSE(r.TryStartShadow());
  r.FinishShadow();
  EXPECT_TRUE(r.TryStartShadow());
  EXPECT_FALSE(r.TryStartShadow());
  r.FinishShadow();
  r.FinishShadow();
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart);
  EXPECT_EQ(f.shadow_sent, 3u);
  EXPECT_EQ(f.shadow_dropped, 3u);
}

TEST(StageRecorderTest, NoiseSamplingSchedule) {
  StageRecorder r(kStart, 4);
  constexpr uint64_t kFirst = StageRecorder::kNoiseSamplesFirst;
  constexpr uint64_t kEvery = StageRecorder::kNoiseSampleEvery;
  std::vector<uint64_t> sampled;
  for (uint64_t copy = 0; copy < kEvery * (StageRecorder::kMaxNoiseSamples + 10); ++copy) {
    if (r.WantNoiseSample()) sampled.push_back(copy);
  }
  ASSERT_EQ(sampled.size(), StageRecorder::kMaxNoiseSamples);
  // The first kFirst copies, then one in kEvery: the primary runs twice rarely, so its tail barely notices.
  for (uint64_t i = 0; i < kFirst; ++i) EXPECT_EQ(sampled[i], i);
  const uint64_t next = (kFirst + kEvery - 1) / kEvery * kEvery;
  EXPECT_EQ(sampled[kFirst], next);
  EXPECT_EQ(sampled[kFirst + 1], next + kEvery);
  EXPECT_EQ(sampled.back(), next + kEvery * (StageRecorder::kMaxNoiseSamples - kFirst - 1));
}

TEST(StageRecorderTest, ComparisonsWithNothingComparedAreNotCounted) {
  StageRecorder r(kStart, 4);
  r.RecordComparison({});  // every output on the GPU
  r.RecordComparison({.mismatch = true});
  r.RecordComparison({.max_abs = 1, .max_rel = 1, .top1_rows = 4, .top1_agree = 3, .compared = true});
  r.RecordComparison({.compared = true});
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart);
  EXPECT_EQ(f.divergence.compared, 3u);
  EXPECT_EQ(f.divergence.diverged, 2u);
  EXPECT_EQ(f.divergence.max_abs, 1);
  EXPECT_EQ(f.divergence.top1_rows, 4u);
  EXPECT_EQ(f.divergence.top1_agree, 3u);
}

TEST(StageRecorderTest, NoiseFloorIsAppliedAtSnapshot) {
  StageRecorder r(kStart, 4);
  r.RecordComparison({.max_abs = 1e-4, .max_rel = 1e-2, .compared = true});
  EXPECT_EQ(r.Snapshot(RolloutCriteria{}, kStart).divergence.diverged, 1u);
  // The primary differs from itself by up to 1e-4: the tolerance becomes 2e-4, also for what came before.
  r.RecordNoise({.max_abs = 1e-4, .max_rel = 1e-3, .compared = true});
  r.RecordNoise({.max_abs = 5e-5, .max_rel = 2e-3, .compared = true});
  r.RecordNoise({.max_abs = 9, .max_rel = 9, .mismatch = true});  // nothing compared: no size of difference
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart);
  EXPECT_EQ(f.noise.compared, 2u);
  EXPECT_EQ(f.noise.max_abs, 1e-4);
  EXPECT_EQ(f.noise.max_rel, 2e-3);
  EXPECT_EQ(f.divergence.compared, 1u);
  EXPECT_EQ(f.divergence.diverged, 0u);
  // The criteria are the snapshot's.
  RolloutCriteria loose;
  loose.rel_tolerance = 0.1;
  loose.abs_tolerance = 0;
  StageRecorder fresh(kStart, 4);
  fresh.RecordComparison({.max_abs = 1e-4, .max_rel = 1e-2, .compared = true});
  EXPECT_EQ(fresh.Snapshot(loose, kStart).divergence.diverged, 0u);
}

TEST(StageRecorderTest, ComparisonsBeyondTheKeptOnesStillCount) {
  StageRecorder r(kStart, 4);
  const Comparison same{.compared = true};
  const Comparison differs{.max_abs = 1, .max_rel = 1, .compared = true};
  const Comparison mismatch{.mismatch = true};
  // Kept: 10% diverge.
  for (size_t i = 0; i < StageRecorder::kMaxKeptComparisons; ++i) r.RecordComparison(i % 10 == 0 ? differs : same);
  // Beyond: 100 mismatches and 9900 others, which are taken to diverge at the kept rate.
  for (int i = 0; i < 10000; ++i) r.RecordComparison(i < 100 ? mismatch : same);
  r.RecordComparison({});  // still not counted
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart);
  EXPECT_EQ(f.divergence.compared, StageRecorder::kMaxKeptComparisons + 10000);
  EXPECT_EQ(f.divergence.diverged, 2000u + 100u + 990u);
}

TEST(StageRecorderTest, ConcurrentAnswersAreAllCounted) {
  StageRecorder r(kStart, 3);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 5000;
  std::atomic<int> in_flight{0};
  std::atomic<int> most_in_flight{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const RolloutArm arm = (i + t) % 2 == 0 ? RolloutArm::kPrimary : RolloutArm::kCandidate;
        r.RecordAnswer(arm, i % 10 == 0, microseconds(100 + i));
        if (r.TryStartShadow()) {
          const int now = in_flight.fetch_add(1) + 1;
          int most = most_in_flight.load();
          while (now > most && !most_in_flight.compare_exchange_weak(most, now)) {
          }
          in_flight.fetch_sub(1);
          r.FinishShadow();
        }
        if (i % 100 == 0) r.RecordComparison({.compared = true});
        (void)r.WantNoiseSample();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const StageFigures f = r.Snapshot(RolloutCriteria{}, kStart);
  EXPECT_EQ(f.primary.requests + f.candidate.requests, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(f.primary.requests, uint64_t{kThreads * kPerThread / 2});
  EXPECT_EQ(f.primary.errors + f.candidate.errors, uint64_t{kThreads * kPerThread / 10});
  EXPECT_EQ(f.shadow_sent + f.shadow_dropped, uint64_t{kThreads * kPerThread});
  EXPECT_LE(most_in_flight.load(), 3);
  EXPECT_EQ(f.divergence.compared, uint64_t{kThreads * kPerThread / 100});
  EXPECT_GT(f.primary.p99_seconds, 0);
}

}  // namespace
}  // namespace weft
