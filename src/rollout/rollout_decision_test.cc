#include "rollout/rollout_decision.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace weft {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr double kInfinite = std::numeric_limits<double>::infinity();

RolloutStage Shadow() {
  return {.kind = RolloutStage::Kind::kShadow, .share = 1, .min_requests = 100, .min_duration = seconds(10)};
}
RolloutStage Canary() {
  return {.kind = RolloutStage::Kind::kCanary, .share = 0.05, .min_requests = 100, .min_duration = seconds(10)};
}

ArmFigures Arm(uint64_t requests, uint64_t errors, double p99_seconds = 0.002) {
  return {.requests = requests, .errors = errors, .p50_seconds = p99_seconds / 2, .p99_seconds = p99_seconds};
}

// A stage that has everything it needs and violates nothing: 12 s, 1000 primary answers, 200 candidate answers and
// 200 comparisons without divergence.
StageFigures Healthy() {
  StageFigures f;
  f.elapsed = seconds(12);
  f.primary = Arm(1000, 0);
  f.candidate = Arm(200, 0);
  f.divergence = {.compared = 200, .diverged = 0, .top1_rows = 200, .top1_agree = 200};
  return f;
}

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(RolloutDecisionTest, EffectiveAbsTolerance) {
  const RolloutCriteria criteria;  // abs_tolerance 1e-5
  EXPECT_EQ(EffectiveAbsTolerance(criteria, {}), 1e-5);
  EXPECT_EQ(EffectiveAbsTolerance(criteria, {.compared = 10, .max_abs = 1e-4}), 2e-4);
  EXPECT_EQ(EffectiveAbsTolerance(criteria, {.compared = 10, .max_abs = 1e-6}), 1e-5);
  // A floor that is infinite would hide every divergence.
  EXPECT_EQ(EffectiveAbsTolerance(criteria, {.compared = 10, .max_abs = kInfinite}), 1e-5);
  // No samples, no floor.
  EXPECT_EQ(EffectiveAbsTolerance(criteria, {.compared = 0, .max_abs = 1}), 1e-5);
}

TEST(RolloutDecisionTest, Diverges) {
  const RolloutCriteria criteria;  // rel_tolerance 1e-3
  EXPECT_TRUE(Diverges({.mismatch = true}, criteria, 1e-5));
  EXPECT_TRUE(Diverges({.max_abs = 1e-4, .max_rel = 2e-3, .compared = true}, criteria, 1e-5));
  // Both tolerances must be exceeded.
  EXPECT_FALSE(Diverges({.max_abs = 1e-4, .max_rel = 1e-4, .compared = true}, criteria, 1e-5));
  EXPECT_FALSE(Diverges({.max_abs = 1e-6, .max_rel = 1, .compared = true}, criteria, 1e-5));
  // At the tolerance is within it.
  EXPECT_FALSE(Diverges({.max_abs = 1e-5, .max_rel = 1, .compared = true}, criteria, 1e-5));
  EXPECT_FALSE(Diverges({.max_abs = 1, .max_rel = 1e-3, .compared = true}, criteria, 1e-5));
  EXPECT_TRUE(Diverges({.max_abs = kInfinite, .max_rel = kInfinite, .compared = true}, criteria, 1e-5));
}

TEST(RolloutDecisionTest, SummarizeDivergence) {
  const RolloutCriteria criteria;
  const std::vector<Comparison> comparisons = {
      {.compared = true},                                                                     // equal
      {.max_abs = 1e-4, .max_rel = 1e-2, .top1_rows = 2, .top1_agree = 1, .compared = true},  // diverges
      {.mismatch = true},                                                                     // diverges
      {},  // nothing compared: not counted
      {.max_abs = 5, .max_rel = 5, .top1_rows = 3, .top1_agree = 3, .compared = false},  // likewise
  };
  const DivergenceFigures d = SummarizeDivergence(comparisons, criteria, {});
  EXPECT_EQ(d.compared, 3u);
  EXPECT_EQ(d.diverged, 2u);
  EXPECT_EQ(d.max_abs, 1e-4);
  EXPECT_EQ(d.max_rel, 1e-2);
  EXPECT_EQ(d.top1_rows, 2u);
  EXPECT_EQ(d.top1_agree, 1u);
  EXPECT_DOUBLE_EQ(d.DivergenceRate(), 2.0 / 3);
  EXPECT_DOUBLE_EQ(d.Top1Agreement(), 0.5);

  // A noise floor of 1e-4 raises the tolerance to 2e-4: only the mismatch diverges.
  const DivergenceFigures noisy = SummarizeDivergence(comparisons, criteria, {.compared = 5, .max_abs = 1e-4});
  EXPECT_EQ(noisy.compared, 3u);
  EXPECT_EQ(noisy.diverged, 1u);
}

TEST(RolloutDecisionTest, HealthyStagesPass) {
  const RolloutCriteria criteria;
  const StageJudgement canary = JudgeStage(Canary(), criteria, Healthy());
  EXPECT_EQ(canary.verdict, StageVerdict::kPass) << canary.reason;
  EXPECT_TRUE(Contains(canary.reason, "candidate error rate 0.000 vs primary 0.000 (allowed +0.010)")) << canary.reason;
  EXPECT_TRUE(Contains(canary.reason, "p99 2.0 ms vs 2.0 ms: ratio 1.00 <= 1.50")) << canary.reason;
  EXPECT_TRUE(Contains(canary.reason, "divergence rate 0.000")) << canary.reason;
  EXPECT_TRUE(Contains(canary.reason, "top-1 agreement 1.000")) << canary.reason;

  const StageJudgement shadow = JudgeStage(Shadow(), criteria, Healthy());
  EXPECT_EQ(shadow.verdict, StageVerdict::kPass) << shadow.reason;
  EXPECT_FALSE(Contains(shadow.reason, "p99")) << shadow.reason;
}

TEST(RolloutDecisionTest, ShadowWaitsForComparisons) {
  StageFigures f = Healthy();
  f.divergence.compared = 57;
  f.elapsed = milliseconds(3200);
  const StageJudgement j = JudgeStage(Shadow(), RolloutCriteria{}, f);
  EXPECT_EQ(j.verdict, StageVerdict::kHold);
  EXPECT_EQ(j.reason, "waiting: 57/100 comparisons, 3.2/10.0 s");
  // Time alone does not make up for comparisons, nor do candidate answers.
  f.elapsed = seconds(60);
  f.candidate.requests = 5000;
  EXPECT_EQ(JudgeStage(Shadow(), RolloutCriteria{}, f).verdict, StageVerdict::kHold);
}

TEST(RolloutDecisionTest, CanaryWaitsForCandidateAnswers) {
  StageFigures f = Healthy();
  f.candidate.requests = 99;
  f.divergence.compared = 5000;
  const StageJudgement j = JudgeStage(Canary(), RolloutCriteria{}, f);
  EXPECT_EQ(j.verdict, StageVerdict::kHold);
  EXPECT_EQ(j.reason, "waiting: 99/100 candidate answers, 12.0/10.0 s");
}

TEST(RolloutDecisionTest, WaitsForTimeOnceCountIsReached) {
  StageFigures f = Healthy();
  f.elapsed = milliseconds(9999);
  const StageJudgement j = JudgeStage(Canary(), RolloutCriteria{}, f);
  EXPECT_EQ(j.verdict, StageVerdict::kHold);
  EXPECT_TRUE(Contains(j.reason, "waiting: 200/100 candidate answers, 10.0/10.0 s")) << j.reason;
  EXPECT_TRUE(Contains(j.reason, "so far")) << j.reason;
  f.elapsed = seconds(10);  // exactly the minimum
  EXPECT_EQ(JudgeStage(Canary(), RolloutCriteria{}, f).verdict, StageVerdict::kPass);
}

TEST(RolloutDecisionTest, ErrorRateThatCannotPassFailsAtOnce) {
  const RolloutCriteria criteria;  // +0.01
  StageFigures f = Healthy();
  f.elapsed = seconds(1);
  f.candidate = Arm(5, 2);  // 2 errors: at least 0.02 over the 100 the stage needs
  f.divergence.compared = 5;
  const StageJudgement canary = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(canary.verdict, StageVerdict::kFail);
  EXPECT_TRUE(Contains(canary.reason,
                       "candidate error rate 0.020 (2 errors over at least 100 answers) vs primary "
                       "0.000 (allowed +0.010)"))
      << canary.reason;
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kFail);

  // One error over the minimum is exactly the allowance: still possible to pass.
  f.candidate = Arm(5, 1);
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kHold);
  // The primary's own errors raise the bar.
  f.candidate = Arm(5, 2);
  f.primary = Arm(1000, 20);
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kHold);
}

TEST(RolloutDecisionTest, ErrorRateFailsOnceCountIsReached) {
  const RolloutCriteria criteria;
  StageFigures f = Healthy();
  f.candidate = Arm(200, 3);  // 0.015
  f.primary = Arm(1000, 0);
  StageJudgement j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kFail);
  EXPECT_EQ(j.reason, "candidate error rate 0.015 vs primary 0.000 (allowed +0.010)");
  // Against a primary that fails at 0.01 too, the increase is within the allowance.
  f.primary = Arm(1000, 10);
  j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;

  // Shadow: the count is of comparisons, and the candidate's rate is over its own answers.
  f = Healthy();
  f.candidate = Arm(150, 3);  // 0.02
  f.divergence.compared = 150;
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kFail);
}

TEST(RolloutDecisionTest, ErrorRateAtTheAllowanceDespiteRounding) {
  RolloutCriteria criteria;
  criteria.max_error_rate_increase = 0.1;
  StageFigures f = Healthy();
  f.primary = Arm(100, 30);    // 0.3
  f.candidate = Arm(100, 40);  // 0.4: 0.4 - 0.3 is 0.10000000000000003 in doubles
  f.divergence = {};
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kPass);
}

TEST(RolloutDecisionTest, CanaryP99Ratio) {
  const RolloutCriteria criteria;  // 1.5
  StageFigures f = Healthy();
  f.candidate.p99_seconds = 0.0041;
  const StageJudgement j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kFail);
  EXPECT_EQ(j.reason, "p99 4.1 ms vs 2.0 ms: ratio 2.05 > 1.50");

  f.primary.p99_seconds = 0.5;
  f.candidate.p99_seconds = 0.75;  // exactly 1.5
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kPass);
  // Shadow copies run at best-effort priority: their latency is not judged.
  f.candidate.p99_seconds = 1;
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kPass);
}

TEST(RolloutDecisionTest, LatencyFormats) {
  StageFigures f = Healthy();
  f.primary.p99_seconds = 400e-6;
  f.candidate.p99_seconds = 1.5;
  EXPECT_EQ(JudgeStage(Canary(), RolloutCriteria{}, f).reason, "p99 1.50 s vs 400 µs: ratio 3750.00 > 1.50");
}

TEST(RolloutDecisionTest, P99NotJudgedWithoutEnoughPrimaryAnswers) {
  const RolloutCriteria criteria;
  StageFigures f = Healthy();
  f.primary = Arm(19, 0, 0.001);
  f.candidate.p99_seconds = 0.01;
  const StageJudgement j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;
  EXPECT_TRUE(Contains(j.reason, "latency not judged: 19 primary answers (20 needed)")) << j.reason;

  // 20 answers are enough to judge.
  f.primary = Arm(20, 0, 0.001);
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kFail);

  // A stage minimum below 20 needs only that many.
  RolloutStage small = Canary();
  small.min_requests = 5;
  f.primary = Arm(5, 0, 0.001);
  f.candidate = Arm(5, 0, 0.01);
  EXPECT_EQ(JudgeStage(small, criteria, f).verdict, StageVerdict::kFail);

  // A primary without latency figures cannot be divided by.
  f = Healthy();
  f.primary.p99_seconds = 0;
  const StageJudgement no_latency = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(no_latency.verdict, StageVerdict::kPass);
  EXPECT_TRUE(Contains(no_latency.reason, "latency not judged")) << no_latency.reason;
}

TEST(RolloutDecisionTest, PreviousPrimaryStandsInForAThinPrimary) {
  const RolloutCriteria criteria;
  StageFigures f = Healthy();
  f.primary = Arm(10, 0, 0.001);  // fewer than the stage's 100
  f.candidate = Arm(200, 0, 0.0041);
  const ArmFigures previous = Arm(5000, 0, 0.002);
  StageJudgement j = JudgeStage(Canary(), criteria, f, &previous);
  EXPECT_EQ(j.verdict, StageVerdict::kFail);
  EXPECT_EQ(j.reason, "p99 4.1 ms vs 2.0 ms (the stage before's): ratio 2.05 > 1.50");
  // Without it, the thin primary's latency is not judged.
  j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;

  // Its error rate stands in too.
  f.candidate = Arm(200, 10, 0.002);                          // 0.05
  const ArmFigures failing_previous = Arm(5000, 250, 0.002);  // 0.05
  j = JudgeStage(Canary(), criteria, f, &failing_previous);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;
  EXPECT_TRUE(Contains(j.reason, "vs primary 0.050 (the stage before's)")) << j.reason;
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kFail);

  // A primary with the stage's minimum is used as it is.
  f.primary = Arm(100, 0, 0.002);
  EXPECT_EQ(JudgeStage(Canary(), criteria, f, &failing_previous).verdict, StageVerdict::kFail);

  // Shadow stages always judge against this window's primary.
  f = Healthy();
  f.primary = Arm(10, 0);
  f.candidate = Arm(200, 10);
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f, &failing_previous).verdict, StageVerdict::kFail);
}

TEST(RolloutDecisionTest, PreviousPrimaryWithoutAnswers) {
  StageFigures f = Healthy();
  f.primary = Arm(0, 0, 0);
  const ArmFigures previous = Arm(0, 0, 0);
  const StageJudgement j = JudgeStage(Canary(), RolloutCriteria{}, f, &previous);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;
  EXPECT_TRUE(Contains(j.reason, "latency not judged: 0 primary answers in the stage before")) << j.reason;
}

TEST(RolloutDecisionTest, DivergenceRate) {
  const RolloutCriteria criteria;  // 0.01
  StageFigures f = Healthy();
  f.divergence.diverged = 3;  // 0.015
  f.divergence.max_abs = 0.5;
  StageJudgement j = JudgeStage(Shadow(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kFail);
  EXPECT_EQ(j.reason, "divergence rate 0.015 (3/200 compared, largest difference 0.5) > 0.010");
  EXPECT_EQ(JudgeStage(Canary(), criteria, f).verdict, StageVerdict::kFail);
  f.divergence.diverged = 2;  // exactly 0.01
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kPass);

  // A canary stage without comparisons does not judge divergence.
  f.divergence = {};
  j = JudgeStage(Canary(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kPass) << j.reason;
  EXPECT_FALSE(Contains(j.reason, "divergence")) << j.reason;
  EXPECT_FALSE(Contains(j.reason, "top-1")) << j.reason;
}

TEST(RolloutDecisionTest, Top1Agreement) {
  const RolloutCriteria criteria;  // 0.99
  StageFigures f = Healthy();
  f.divergence.top1_rows = 1000;
  f.divergence.top1_agree = 985;
  const StageJudgement j = JudgeStage(Shadow(), criteria, f);
  EXPECT_EQ(j.verdict, StageVerdict::kFail);
  EXPECT_EQ(j.reason, "top-1 agreement 0.985 (985/1000 rows) < 0.990");
  f.divergence.top1_agree = 990;
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kPass);
  f.divergence.top1_rows = 0;
  f.divergence.top1_agree = 0;
  EXPECT_EQ(JudgeStage(Shadow(), criteria, f).verdict, StageVerdict::kPass);
}

TEST(RolloutDecisionTest, ViolationsFailBeforeTheMinimumDuration) {
  StageFigures f = Healthy();
  f.elapsed = seconds(1);
  f.divergence.diverged = 100;
  EXPECT_EQ(JudgeStage(Shadow(), RolloutCriteria{}, f).verdict, StageVerdict::kFail);
}

TEST(RolloutDecisionTest, NextStep) {
  EXPECT_EQ(NextStep(StageVerdict::kHold, 0, 4), RolloutStep::kStay);
  EXPECT_EQ(NextStep(StageVerdict::kHold, 3, 4), RolloutStep::kStay);
  EXPECT_EQ(NextStep(StageVerdict::kFail, 0, 4), RolloutStep::kRollBack);
  EXPECT_EQ(NextStep(StageVerdict::kFail, 3, 4), RolloutStep::kRollBack);
  EXPECT_EQ(NextStep(StageVerdict::kPass, 0, 4), RolloutStep::kNextStage);
  EXPECT_EQ(NextStep(StageVerdict::kPass, 2, 4), RolloutStep::kNextStage);
  EXPECT_EQ(NextStep(StageVerdict::kPass, 3, 4), RolloutStep::kPromote);
  EXPECT_EQ(NextStep(StageVerdict::kPass, 0, 1), RolloutStep::kPromote);
}

TEST(RolloutDecisionTest, ToCandidateEdges) {
  const uint64_t hash = 42;
  for (uint64_t draw : {uint64_t{0}, uint64_t{1}, ~uint64_t{0}}) {
    EXPECT_FALSE(ToCandidate(0, nullptr, draw));
    EXPECT_FALSE(ToCandidate(-1, nullptr, draw));
    EXPECT_FALSE(ToCandidate(std::numeric_limits<double>::quiet_NaN(), nullptr, draw));
    EXPECT_FALSE(ToCandidate(0, &hash, draw));
    EXPECT_TRUE(ToCandidate(1, nullptr, draw));
    EXPECT_TRUE(ToCandidate(1.5, nullptr, draw));
    EXPECT_TRUE(ToCandidate(1, &hash, draw));
  }
}

TEST(RolloutDecisionTest, StickyChoiceIgnoresTheDrawAndKeepsClientsAsTheShareGrows) {
  const std::vector<double> shares = {0.01, 0.05, 0.25, 0.5, 0.75, 0.99};
  for (uint64_t client = 0; client < 5000; ++client) {
    const uint64_t hash = client * 7919;  // hashes need not be random: they are mixed
    bool before = false;
    for (double share : shares) {
      const bool now = ToCandidate(share, &hash, 0);
      EXPECT_EQ(now, ToCandidate(share, &hash, ~uint64_t{0})) << client;
      // A client on the candidate stays there as the share grows.
      EXPECT_TRUE(now || !before) << "client " << client << " share " << share;
      before = now;
    }
  }
}

TEST(RolloutDecisionTest, SharesAreHonouredOverManyChoices) {
  constexpr int kChoices = 100000;
  for (double share : {0.05, 0.25, 0.5}) {
    int drawn = 0;
    int sticky = 0;
    for (int i = 0; i < kChoices; ++i) {
      const auto n = static_cast<uint64_t>(i);
      drawn += ToCandidate(share, nullptr, n) ? 1 : 0;  // a counter as the draw: mixed too
      sticky += ToCandidate(share, &n, 12345) ? 1 : 0;
    }
    EXPECT_NEAR(static_cast<double>(drawn) / kChoices, share, 0.01) << share;
    EXPECT_NEAR(static_cast<double>(sticky) / kChoices, share, 0.01) << share;
  }
}

}  // namespace
}  // namespace weft
