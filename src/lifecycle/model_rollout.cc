#include "lifecycle/model_rollout.h"

#include <cstdio>
#include <ctime>

#include "base/log.h"
#include "rollout/rollout_decision.h"

namespace weft {
namespace {

// Now in UTC, RFC 3339 with milliseconds: "2026-12-02T08:01:02.345Z".
std::string UtcNow() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char text[64];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  return text;
}

std::string StageName(const RolloutSpec& spec, size_t index) {
  const RolloutStage& stage = spec.stages[index];
  char share[32];
  std::snprintf(share, sizeof(share), "%g%%", stage.share * 100);
  return "stage " + std::to_string(index + 1) + "/" + std::to_string(spec.stages.size()) + " (" +
         std::string(RolloutStageKindName(stage.kind)) + " " + share + ")";
}

}  // namespace

// The rollout's metric series (docs/metrics.md, "Rollouts"). They stay after the rollout ends, with its last values:
// one set per model, whatever the number of rollouts.
struct ModelRollout::Series {
  Gauge* stage;
  std::array<Counter*, 2> answers;
  std::array<Counter*, 2> errors;
  std::array<Gauge*, 2> p99;
  Counter* shadow_sent;
  Counter* shadow_dropped;
  Gauge* divergence_rate;
  Gauge* max_abs;
  Gauge* top1_agreement;
  Gauge* noise_max_abs;
  MetricsRegistry* metrics;
  std::string model;

  Series(MetricsRegistry* m, const std::string& name) : metrics(m), model(name) {
    stage = m->GetGauge("weft_rollout_stage",
                        "The stage a rollout of the model is in (1 = the first); 0 when none is under way.",
                        {{"model", name}});
    for (size_t i = 0; i < 2; ++i) {
      const std::string arm = i == 0 ? "primary" : "candidate";
      answers[i] = m->GetCounter("weft_rollout_requests_total",
                                 "Answers of each arm of the model's rollouts (the candidate's include shadow copies).",
                                 {{"model", name}, {"arm", arm}});
      errors[i] =
          m->GetCounter("weft_rollout_errors_total",
                        "Answers of each arm of the model's rollouts that were errors (any but a cancellation).",
                        {{"model", name}, {"arm", arm}});
      p99[i] = m->GetGauge("weft_rollout_latency_p99_seconds",
                           "The p99 latency of each arm over the current stage of the model's rollout.",
                           {{"model", name}, {"arm", arm}});
    }
    const std::string copies_help =
        "Shadow copies of the model's requests sent to a rollout's candidate, or dropped "
        "because the candidate was busy.";
    shadow_sent =
        m->GetCounter("weft_rollout_shadow_copies_total", copies_help, {{"model", name}, {"outcome", "sent"}});
    shadow_dropped =
        m->GetCounter("weft_rollout_shadow_copies_total", copies_help, {{"model", name}, {"outcome", "dropped"}});
    divergence_rate = m->GetGauge("weft_rollout_divergence_rate",
                                  "The share of the candidate's compared answers that diverge from the primary's "
                                  "beyond the tolerance, over the current stage.",
                                  {{"model", name}});
    max_abs = m->GetGauge("weft_rollout_max_abs_difference",
                          "The largest absolute difference between the candidate's and the primary's outputs over the "
                          "current stage.",
                          {{"model", name}});
    top1_agreement = m->GetGauge("weft_rollout_top1_agreement",
                                 "The share of classification rows whose arg max agrees between candidate and primary "
                                 "over the current stage.",
                                 {{"model", name}});
    noise_max_abs = m->GetGauge("weft_rollout_noise_max_abs_difference",
                                "The largest absolute difference between the primary's answers to the same input (the "
                                "noise floor) over the current stage.",
                                {{"model", name}});
  }

  Counter* Decisions(const std::string& action) const {
    return metrics->GetCounter("weft_rollout_decisions_total",
                               "Decisions of the model's rollouts: start, next_stage, promote, rollback, abort, "
                               "candidate_failed, model_removed.",
                               {{"model", model}, {"action", action}});
  }
};

ModelRollout::ModelRollout(std::string model, RolloutSpec spec, int64_t primary, bool automatic,
                           MetricsRegistry* metrics, SteadyTime now)
    : model_(std::move(model)),
      spec_(std::move(spec)),
      primary_(primary),
      automatic_(automatic),
      metrics_(metrics),
      started_(UtcNow()),
      series_(std::make_unique<Series>(metrics, model_)) {
  (void)now;
  Decide("start",
         std::string(automatic_ ? "automatic (the config's weft.rollout policy)" : "requested") + ": version " +
             std::to_string(spec_.candidate) + " against version " + std::to_string(primary_) +
             "; it starts once the candidate serves",
         {});
}

ModelRollout::~ModelRollout() = default;

void ModelRollout::Begin(SteadyTime now) {
  if (started() || !running()) return;
  StartStage(0, now);
}

void ModelRollout::StartStage(size_t index, SteadyTime now) {
  stage_ = index;
  recorder_ = std::make_shared<StageRecorder>(now, spec_.shadow_max_in_flight);
  const RolloutStage& stage = spec_.stages[index];
  auto route = std::make_shared<RolloutRoute>();
  route->primary = primary_;
  route->candidate = spec_.candidate;
  route->canary_share = stage.kind == RolloutStage::Kind::kCanary ? stage.share : 0;
  route->shadow_share = stage.kind == RolloutStage::Kind::kShadow ? stage.share : 0;
  route->sticky_key = spec_.sticky_key;
  route->recorder = recorder_;
  route->answers = series_->answers;
  route->errors = series_->errors;
  route->shadow_sent = series_->shadow_sent;
  route->shadow_dropped = series_->shadow_dropped;
  route_ = std::move(route);
  series_->stage->Set(static_cast<double>(index + 1));
  WEFT_LOG(Info) << "model '" << model_ << "' rollout of version " << spec_.candidate << ": " << StageName(spec_, index)
                 << " begins";
}

bool ModelRollout::Tick(SteadyTime now) {
  if (!running() || !started()) return false;
  const RolloutStage& stage = spec_.stages[stage_];
  StageFigures figures = recorder_->Snapshot(spec_.criteria, now);
  last_figures_ = figures;
  UpdateGauges(figures);
  const StageJudgement judgement =
      JudgeStage(stage, spec_.criteria, figures, previous_primary_ ? &*previous_primary_ : nullptr);
  switch (NextStep(judgement.verdict, stage_, spec_.stages.size())) {
    case RolloutStep::kStay: return false;
    case RolloutStep::kNextStage:
      Decide("next_stage", StageName(spec_, stage_) + " passed: " + judgement.reason, figures);
      previous_primary_ = figures.primary;
      StartStage(stage_ + 1, now);
      return true;
    case RolloutStep::kPromote:
      Decide("promote", StageName(spec_, stage_) + " passed, the last: " + judgement.reason, figures);
      outcome_ = Outcome::kPromoted;
      break;
    case RolloutStep::kRollBack:
      Decide("rollback", StageName(spec_, stage_) + " failed: " + judgement.reason, figures);
      outcome_ = Outcome::kRolledBack;
      break;
  }
  ended_ = UtcNow();
  route_.reset();
  series_->stage->Set(0);
  return true;
}

void ModelRollout::RollBack(const std::string& action, const std::string& reason, SteadyTime now) {
  if (!running()) return;
  if (recorder_) last_figures_ = recorder_->Snapshot(spec_.criteria, now);
  Decide(action, reason, last_figures_);
  outcome_ = Outcome::kRolledBack;
  ended_ = UtcNow();
  route_.reset();
  series_->stage->Set(0);
}

void ModelRollout::Decide(const std::string& action, const std::string& reason, const StageFigures& figures) {
  decisions_.push_back({UtcNow(), stage_, action, reason, figures});
  series_->Decisions(action)->Increment();
  WEFT_LOG(Info) << "model '" << model_ << "' rollout of version " << spec_.candidate << ": " << action << ": "
                 << reason << " [primary " << figures.primary.requests << " answers, " << figures.primary.errors
                 << " errors; candidate " << figures.candidate.requests << " answers, " << figures.candidate.errors
                 << " errors; " << figures.divergence.compared << " compared, " << figures.divergence.diverged
                 << " diverged; shadow " << figures.shadow_sent << " sent, " << figures.shadow_dropped << " dropped]";
}

void ModelRollout::UpdateGauges(const StageFigures& figures) {
  series_->p99[0]->Set(figures.primary.p99_seconds);
  series_->p99[1]->Set(figures.candidate.p99_seconds);
  series_->divergence_rate->Set(figures.divergence.DivergenceRate());
  series_->max_abs->Set(figures.divergence.max_abs);
  series_->top1_agreement->Set(figures.divergence.Top1Agreement());
  series_->noise_max_abs->Set(figures.noise.max_abs);
}

std::shared_ptr<const RolloutRoute> ModelRollout::Route() const { return route_; }

RolloutReport ModelRollout::Report(SteadyTime now) const {
  RolloutReport report;
  report.model = model_;
  switch (outcome_) {
    case Outcome::kRunning:
      report.state = started() ? std::string(RolloutStageKindName(spec_.stages[stage_].kind)) : "loading";
      break;
    case Outcome::kPromoted: report.state = "promoted"; break;
    case Outcome::kRolledBack: report.state = "rolled_back"; break;
  }
  report.automatic = automatic_;
  report.primary = primary_;
  report.candidate = spec_.candidate;
  report.stage = stage_;
  report.spec = spec_;
  report.figures = running() && recorder_ ? recorder_->Snapshot(spec_.criteria, now) : last_figures_;
  report.started = started_;
  report.ended = ended_;
  report.decisions = decisions_;
  return report;
}

}  // namespace weft
