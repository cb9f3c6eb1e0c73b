#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "rollout/output_compare.h"
#include "rollout/rollout_spec.h"

namespace weft {

// The judgement of a rollout's stage: pure functions of the stage's figures, with no clock and no threads.

// One arm (the primary or the candidate) over a stage's window.
struct ArmFigures {
  uint64_t requests = 0;   // answered
  uint64_t errors = 0;     // of those, errors (every code but CANCELLED and ABORTED)
  double p50_seconds = 0;  // Submit to answer
  double p99_seconds = 0;
  double ErrorRate() const { return requests == 0 ? 0 : static_cast<double>(errors) / requests; }
};

// The candidate's answers against the primary's over a stage's window, judged with the tolerances then in force.
struct DivergenceFigures {
  uint64_t compared = 0;
  uint64_t diverged = 0;
  double max_abs = 0;  // the largest seen
  double max_rel = 0;
  uint64_t top1_rows = 0;
  uint64_t top1_agree = 0;
  double DivergenceRate() const { return compared == 0 ? 0 : static_cast<double>(diverged) / compared; }
  double Top1Agreement() const { return top1_rows == 0 ? 1 : static_cast<double>(top1_agree) / top1_rows; }
};

// The noise floor: the primary against itself on repeated inputs.
struct NoiseFigures {
  uint64_t compared = 0;
  double max_abs = 0;
  double max_rel = 0;
};

struct StageFigures {
  std::chrono::nanoseconds elapsed{0};  // since the stage began
  ArmFigures primary;
  ArmFigures candidate;  // in shadow stages: the shadow copies' answers
  DivergenceFigures divergence;
  NoiseFigures noise;
  uint64_t shadow_sent = 0;
  uint64_t shadow_dropped = 0;  // the candidate was busy (shadow_max_in_flight copies already out)
};

// The absolute tolerance in force: the criteria's, or twice the noise floor's largest difference when that is larger.
double EffectiveAbsTolerance(const RolloutCriteria& criteria, const NoiseFigures& noise);

// Whether one comparison diverges under `criteria` with absolute tolerance `abs_tolerance`.
bool Diverges(const Comparison& comparison, const RolloutCriteria& criteria, double abs_tolerance);

// Sums comparisons into DivergenceFigures, each judged with the tolerance the noise floor gives now.
DivergenceFigures SummarizeDivergence(std::span<const Comparison> comparisons, const RolloutCriteria& criteria,
                                      const NoiseFigures& noise);

enum class StageVerdict {
  kHold,  // not enough requests or time yet, and nothing violated
  kPass,  // minimums reached, every criterion holds
  kFail,  // a criterion is violated
};
struct StageJudgement {
  StageVerdict verdict = StageVerdict::kHold;
  std::string reason;  // what passed, failed or is still missing, with the figures
};

// Judges a stage. Shadow stages judge the candidate's error rate and divergence (latency under best-effort priority
// says nothing); canary stages judge error rate, p99 ratio and, where answers were compared, divergence. With fewer
// primary answers than the stage's minimum in a canary stage, `previous_primary` (the primary over the stage
// before) stands in for the primary's error rate and latency. A candidate error rate that must fail whatever the
// remaining requests bring (its errors alone, over the stage's minimum, exceed the allowance) fails at once.
StageJudgement JudgeStage(const RolloutStage& stage, const RolloutCriteria& criteria, const StageFigures& figures,
                          const ArmFigures* previous_primary = nullptr);

// Where a rollout goes after a judgement.
enum class RolloutStep { kStay, kNextStage, kPromote, kRollBack };
RolloutStep NextStep(StageVerdict verdict, size_t stage_index, size_t stage_count);

// Whether a request goes to the candidate in a canary stage of `share`. `sticky_hash` (a hash of the sticky key's
// value) makes the choice a function of the client, so that a share that grows keeps the clients it had; without
// one, `draw` (uniform over uint64) decides.
bool ToCandidate(double share, const uint64_t* sticky_hash, uint64_t draw);

}  // namespace weft
