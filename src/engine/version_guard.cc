#include "engine/version_guard.h"

#include "base/log.h"

namespace weft {
namespace {

constexpr char kStateName[] = "weft_breaker_state";
constexpr char kTransitionsName[] = "weft_breaker_transitions_total";
constexpr char kRejectedName[] = "weft_breaker_rejected_total";

Labels VersionLabels(const std::string& model, int64_t version) {
  return {{"model", model}, {"version", std::to_string(version)}};
}

Labels TransitionLabels(const std::string& model, int64_t version, BreakerState to) {
  return {{"model", model}, {"version", std::to_string(version)}, {"to", std::string(BreakerStateName(to))}};
}

double GaugeValue(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed: return 0;
    case BreakerState::kOpen: return 1;
    case BreakerState::kHalfOpen: return 2;
  }
  return 0;
}

}  // namespace

VersionGuard::VersionGuard(const std::string& model, int64_t version, BreakerOptions options, MetricsRegistry* metrics)
    : model_(model),
      version_(version),
      breaker_(options),
      state_gauge_(metrics->GetGauge(kStateName,
                                     "Circuit breaker state per model version: 0 closed, 1 open, 2 half-open.",
                                     VersionLabels(model, version))),
      rejected_(metrics->GetCounter(kRejectedName, "Requests a version's open circuit breaker turned away.",
                                    VersionLabels(model, version))),
      to_open_(metrics->GetCounter(kTransitionsName, "Circuit breaker state changes, by the state entered.",
                                   TransitionLabels(model, version, BreakerState::kOpen))),
      to_half_open_(metrics->GetCounter(kTransitionsName, "Circuit breaker state changes, by the state entered.",
                                        TransitionLabels(model, version, BreakerState::kHalfOpen))),
      to_closed_(metrics->GetCounter(kTransitionsName, "Circuit breaker state changes, by the state entered.",
                                     TransitionLabels(model, version, BreakerState::kClosed))) {
  state_gauge_->Set(0);
}

VersionGuard::Admission VersionGuard::Admit(SteadyTime now) {
  CircuitBreaker::Admission admission;
  BreakerState before, after;
  {
    std::lock_guard lock(mu_);
    before = breaker_.state();
    admission = breaker_.Admit(now);
    after = breaker_.state();
    if (after != before) Published(after);
  }
  if (after == BreakerState::kHalfOpen && before != after) {
    WEFT_LOG(Info) << "model '" << model_ << "' version " << version_ << ": circuit breaker half-open, probing";
  }
  if (admission.admitted) return {Status(), admission.probe};
  rejected_->Increment();
  return {Unavailable("model '" + model_ + "' version " + std::to_string(version_) +
                      " is failing and its circuit breaker is open")
              .WithRetryAfter(admission.retry_after),
          false};
}

void VersionGuard::Record(const Status& result, bool probe, SteadyTime now) {
  const CallOutcome outcome = ClassifyForBreaker(result);
  if (outcome == CallOutcome::kIgnored && !probe) return;
  BreakerState before, after;
  uint32_t failures = 0, calls = 0;
  std::chrono::milliseconds open_for{0};
  {
    std::lock_guard lock(mu_);
    before = breaker_.state();
    breaker_.Record(outcome, probe, now);
    after = breaker_.state();
    if (after == before) return;
    Published(after);
    failures = breaker_.window_failures(now);
    calls = breaker_.window_calls(now);
    open_for = breaker_.open_period();
  }
  if (after == BreakerState::kOpen) {
    WEFT_LOG(Warning) << "model '" << model_ << "' version " << version_ << ": circuit breaker open for "
                      << open_for.count() << " ms after " << result.ToString()
                      << (before == BreakerState::kHalfOpen
                              ? " (a probe failed)"
                              : " (" + std::to_string(failures) + " of " + std::to_string(calls) + " calls failed)");
  } else if (after == BreakerState::kClosed) {
    WEFT_LOG(Info) << "model '" << model_ << "' version " << version_ << ": circuit breaker closed, probes succeeded";
  }
}

BreakerState VersionGuard::state() const {
  std::lock_guard lock(mu_);
  return breaker_.state();
}

void VersionGuard::Published(BreakerState after) {
  state_gauge_->Set(GaugeValue(after));
  switch (after) {
    case BreakerState::kOpen: to_open_->Increment(); break;
    case BreakerState::kHalfOpen: to_half_open_->Increment(); break;
    case BreakerState::kClosed: to_closed_->Increment(); break;
  }
}

void VersionGuard::RemoveSeries(MetricsRegistry* metrics, const std::string& model, int64_t version) {
  metrics->Remove(kStateName, VersionLabels(model, version));
  metrics->Remove(kRejectedName, VersionLabels(model, version));
  for (BreakerState to : {BreakerState::kOpen, BreakerState::kHalfOpen, BreakerState::kClosed}) {
    metrics->Remove(kTransitionsName, TransitionLabels(model, version, to));
  }
}

}  // namespace weft
