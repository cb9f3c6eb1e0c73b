#include "rollout/rollout_decision.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>
#include <vector>

namespace weft {
namespace {

// Rates are differences of two quotients: an increase exactly at the allowance must not fail by a rounding.
constexpr double kRateSlack = 1e-9;
// With fewer primary answers in the window than this (or the stage's minimum, when smaller), the primary's p99 is
// too rough to judge the candidate's against.
constexpr uint64_t kMinPrimaryLatencyAnswers = 20;

std::string Fixed(double value, int digits) {
  std::array<char, 64> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value, std::chars_format::fixed, digits);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::string("?");
}

// The shortest text that reads back as `value` ("1e-05").
std::string Shortest(double value) {
  std::array<char, 64> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::string("?");
}

std::string FormatLatency(double seconds) {
  if (seconds >= 1) return Fixed(seconds, 2) + " s";
  if (seconds >= 1e-3) return Fixed(seconds * 1e3, 1) + " ms";
  return Fixed(seconds * 1e6, 0) + " µs";
}

std::string Seconds(std::chrono::nanoseconds d) { return Fixed(std::chrono::duration<double>(d).count(), 1); }

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& part : parts) {
    if (!out.empty()) out += "; ";
    out += part;
  }
  return out;
}

StageJudgement Judgement(StageVerdict verdict, std::string reason) {
  return StageJudgement{.verdict = verdict, .reason = std::move(reason)};
}

// The primary figures the candidate is judged against.
struct Reference {
  const ArmFigures* arm;
  bool previous;  // the stage before's, standing in for a primary with too few answers in this one
};

Reference PickReference(const RolloutStage& stage, const StageFigures& figures, const ArmFigures* previous_primary) {
  const bool use_previous = stage.kind == RolloutStage::Kind::kCanary && previous_primary != nullptr &&
                            figures.primary.requests < stage.min_requests;
  return use_previous ? Reference{previous_primary, true} : Reference{&figures.primary, false};
}

std::string PrimaryRate(const Reference& primary) {
  return Fixed(primary.arm->ErrorRate(), 3) + (primary.previous ? " (the stage before's)" : "");
}

bool ErrorRateFails(double candidate_rate, const Reference& primary, const RolloutCriteria& criteria) {
  return candidate_rate - primary.arm->ErrorRate() > criteria.max_error_rate_increase + kRateSlack;
}

// The p99 ratio, judged only against enough primary answers to show a p99: the reason, and `failed`.
std::string JudgeLatency(const RolloutStage& stage, const RolloutCriteria& criteria, const ArmFigures& candidate,
                         const Reference& primary, bool* failed) {
  const uint64_t needed =
      primary.previous ? 1 : std::max<uint64_t>(std::min(stage.min_requests, kMinPrimaryLatencyAnswers), 1);
  if (primary.arm->requests < needed || !(primary.arm->p99_seconds > 0)) {
    return "latency not judged: " + std::to_string(primary.arm->requests) + " primary answers" +
           (primary.previous ? " in the stage before" : "") + " (" + std::to_string(needed) + " needed)";
  }
  const double ratio = candidate.p99_seconds / primary.arm->p99_seconds;
  *failed = ratio > criteria.max_p99_ratio;
  return "p99 " + FormatLatency(candidate.p99_seconds) + " vs " + FormatLatency(primary.arm->p99_seconds) +
         (primary.previous ? " (the stage before's)" : "") + ": ratio " + Fixed(ratio, 2) + (*failed ? " > " : " <= ") +
         Fixed(criteria.max_p99_ratio, 2);
}

std::string DivergenceReason(const DivergenceFigures& d, const RolloutCriteria& criteria, bool failed) {
  return "divergence rate " + Fixed(d.DivergenceRate(), 3) + " (" + std::to_string(d.diverged) + "/" +
         std::to_string(d.compared) + " compared, largest difference " + Shortest(d.max_abs) + ")" +
         (failed ? " > " : " <= ") + Fixed(criteria.max_divergence_rate, 3);
}

std::string Top1Reason(const DivergenceFigures& d, const RolloutCriteria& criteria, bool failed) {
  return "top-1 agreement " + Fixed(d.Top1Agreement(), 3) + " (" + std::to_string(d.top1_agree) + "/" +
         std::to_string(d.top1_rows) + " rows)" + (failed ? " < " : " >= ") + Fixed(criteria.min_top1_agreement, 3);
}

std::string Waiting(const RolloutStage& stage, const StageFigures& figures, uint64_t count) {
  const bool shadow = stage.kind == RolloutStage::Kind::kShadow;
  return "waiting: " + std::to_string(count) + "/" + std::to_string(stage.min_requests) +
         (shadow ? " comparisons, " : " candidate answers, ") + Seconds(figures.elapsed) + "/" +
         Seconds(stage.min_duration) + " s";
}

// splitmix64's finalizer: spreads any hash (or a counter) over the whole of uint64.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The top 53 bits as a double in [0, 1).
double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

double EffectiveAbsTolerance(const RolloutCriteria& criteria, const NoiseFigures& noise) {
  // A floor that holds an infinity (NaN against a number) says nothing about the size of differences: left out, so
  // that it cannot hide every divergence.
  if (noise.compared == 0 || !std::isfinite(noise.max_abs)) return criteria.abs_tolerance;
  return std::max(criteria.abs_tolerance, 2 * noise.max_abs);
}

bool Diverges(const Comparison& comparison, const RolloutCriteria& criteria, double abs_tolerance) {
  if (comparison.mismatch) return true;
  return comparison.max_abs > abs_tolerance && comparison.max_rel > criteria.rel_tolerance;
}

DivergenceFigures SummarizeDivergence(std::span<const Comparison> comparisons, const RolloutCriteria& criteria,
                                      const NoiseFigures& noise) {
  const double abs_tolerance = EffectiveAbsTolerance(criteria, noise);
  DivergenceFigures out;
  for (const Comparison& c : comparisons) {
    if (!c.compared && !c.mismatch) continue;  // nothing in host memory: says nothing
    ++out.compared;
    out.diverged += Diverges(c, criteria, abs_tolerance) ? 1 : 0;
    out.max_abs = std::max(out.max_abs, c.max_abs);
    out.max_rel = std::max(out.max_rel, c.max_rel);
    out.top1_rows += c.top1_rows;
    out.top1_agree += c.top1_agree;
  }
  return out;
}

StageJudgement JudgeStage(const RolloutStage& stage, const RolloutCriteria& criteria, const StageFigures& figures,
                          const ArmFigures* previous_primary) {
  const bool shadow = stage.kind == RolloutStage::Kind::kShadow;
  const ArmFigures& candidate = figures.candidate;
  const Reference primary = PickReference(stage, figures, previous_primary);

  const uint64_t count = shadow ? figures.divergence.compared : candidate.requests;
  if (count < stage.min_requests) {
    // The lowest rate the candidate can end the stage with: its errors so far over the stage's minimum of answers.
    const uint64_t at_least = std::max({candidate.requests, stage.min_requests, uint64_t{1}});
    const double lowest_rate = static_cast<double>(candidate.errors) / static_cast<double>(at_least);
    if (ErrorRateFails(lowest_rate, primary, criteria)) {
      return Judgement(StageVerdict::kFail,
                       "candidate error rate " + Fixed(lowest_rate, 3) + " (" + std::to_string(candidate.errors) +
                           " errors over at least " + std::to_string(at_least) + " answers) vs primary " +
                           PrimaryRate(primary) + " (allowed +" + Fixed(criteria.max_error_rate_increase, 3) + ")");
    }
    return Judgement(StageVerdict::kHold, Waiting(stage, figures, count));
  }

  std::vector<std::string> held;  // the criteria that hold, for the reason
  const double error_rate = candidate.ErrorRate();
  std::string error_reason = "candidate error rate " + Fixed(error_rate, 3) + " vs primary " + PrimaryRate(primary) +
                             " (allowed +" + Fixed(criteria.max_error_rate_increase, 3) + ")";
  if (ErrorRateFails(error_rate, primary, criteria)) return Judgement(StageVerdict::kFail, std::move(error_reason));
  held.push_back(std::move(error_reason));

  // In a shadow stage the copies run at best-effort priority: their latency says nothing about the candidate's.
  if (!shadow) {
    bool failed = false;
    std::string latency = JudgeLatency(stage, criteria, candidate, primary, &failed);
    if (failed) return Judgement(StageVerdict::kFail, std::move(latency));
    held.push_back(std::move(latency));
  }

  const DivergenceFigures& divergence = figures.divergence;
  if (divergence.compared > 0) {
    const bool failed = divergence.DivergenceRate() > criteria.max_divergence_rate;
    std::string reason = DivergenceReason(divergence, criteria, failed);
    if (failed) return Judgement(StageVerdict::kFail, std::move(reason));
    held.push_back(std::move(reason));
  }
  if (divergence.top1_rows > 0) {
    const bool failed = divergence.Top1Agreement() < criteria.min_top1_agreement;
    std::string reason = Top1Reason(divergence, criteria, failed);
    if (failed) return Judgement(StageVerdict::kFail, std::move(reason));
    held.push_back(std::move(reason));
  }

  if (figures.elapsed < stage.min_duration) {
    return Judgement(StageVerdict::kHold, Waiting(stage, figures, count) + "; so far " + Join(held));
  }
  return Judgement(StageVerdict::kPass, Join(held));
}

RolloutStep NextStep(StageVerdict verdict, size_t stage_index, size_t stage_count) {
  switch (verdict) {
    case StageVerdict::kHold: return RolloutStep::kStay;
    case StageVerdict::kFail: return RolloutStep::kRollBack;
    case StageVerdict::kPass: return stage_index + 1 >= stage_count ? RolloutStep::kPromote : RolloutStep::kNextStage;
  }
  return RolloutStep::kStay;
}

bool ToCandidate(double share, const uint64_t* sticky_hash, uint64_t draw) {
  if (!(share > 0)) return false;  // NaN too
  if (share >= 1) return true;
  // A client's point in [0, 1) is fixed by its hash, so a share that grows keeps every client it had.
  return UnitInterval(Mix(sticky_hash != nullptr ? *sticky_hash : draw)) < share;
}

}  // namespace weft
