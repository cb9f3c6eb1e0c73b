#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.h"
#include "engine/engine.h"
#include "metrics/metrics.h"
#include "rollout/rollout_report.h"
#include "rollout/rollout_spec.h"

namespace weft {

// One rollout of one model from its primary version to a candidate, stage by stage (docs/rollouts.md). The live
// repository's controller thread owns it and asks it, on a timer, to judge the current stage (JudgeStage, pure);
// it answers with the engine's route overlay for the stage (a new StageRecorder per stage) and, at the end, whether
// the candidate was promoted. Every decision is logged with its figures and kept for the report. Not thread-safe: the
// controller's own.
class ModelRollout {
 public:
  enum class Outcome { kRunning, kPromoted, kRolledBack };

  ModelRollout(std::string model, RolloutSpec spec, int64_t primary, bool automatic, MetricsRegistry* metrics,
               SteadyTime now);
  ~ModelRollout();
  ModelRollout(const ModelRollout&) = delete;
  ModelRollout& operator=(const ModelRollout&) = delete;

  const RolloutSpec& spec() const { return spec_; }
  int64_t primary() const { return primary_; }
  int64_t candidate() const { return spec_.candidate; }
  Outcome outcome() const { return outcome_; }
  bool running() const { return outcome_ == Outcome::kRunning; }
  // The first stage has begun (the candidate serves).
  bool started() const { return recorder_ != nullptr; }

  // The candidate serves: the first stage begins now. Later calls do nothing.
  void Begin(SteadyTime now);
  // Judges the current stage. True when the route changed: a new stage began, or the rollout ended.
  bool Tick(SteadyTime now);
  // Ends a rollout that is still running with a rollback: `action` "abort" (the API's DELETE), "candidate_failed"
  // (it did not load), "model_removed".
  void RollBack(const std::string& action, const std::string& reason, SteadyTime now);

  // The overlay of the current stage for the model's route; null before the first stage and once ended.
  std::shared_ptr<const RolloutRoute> Route() const;
  RolloutReport Report(SteadyTime now) const;

  // How often the controller should call Tick while the rollout runs.
  static constexpr std::chrono::milliseconds kTickInterval{100};

 private:
  void Decide(const std::string& action, const std::string& reason, const StageFigures& figures);
  void StartStage(size_t index, SteadyTime now);
  void UpdateGauges(const StageFigures& figures);

  const std::string model_;
  const RolloutSpec spec_;
  const int64_t primary_;
  const bool automatic_;
  MetricsRegistry* const metrics_;
  const std::string started_;
  std::string ended_;
  Outcome outcome_ = Outcome::kRunning;
  size_t stage_ = 0;
  std::shared_ptr<StageRecorder> recorder_;  // the current stage's; null before the first
  std::shared_ptr<const RolloutRoute> route_;
  StageFigures last_figures_;                   // of the current stage, or the last one once ended
  std::optional<ArmFigures> previous_primary_;  // the primary over the stage before
  std::vector<RolloutDecisionRecord> decisions_;
  struct Series;
  std::unique_ptr<Series> series_;
};

}  // namespace weft
