#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "metrics/metrics.h"
#include "model/resilience_config.h"
#include "resilience/circuit_breaker.h"

namespace weft {

// The circuit breaker of one version in service, shared by the threads that submit to it and those that answer
// its requests, with its metrics and log lines. Thread-safe; the decisions are CircuitBreaker's.
class VersionGuard {
 public:
  VersionGuard(const std::string& model, int64_t version, BreakerOptions options, MetricsRegistry* metrics);

  // Whether the version may take a request now. Refused: Unavailable naming the model, with Retry-After set to when
  // the breaker half-opens.
  struct Admission {
    Status refused;
    bool probe = false;
  };
  Admission Admit(SteadyTime now);
  // The answer of an admitted request (`probe` from its Admission).
  void Record(const Status& result, bool probe, SteadyTime now);

  BreakerState state() const;

  // The series of (model, version): removed when its last copy is gone.
  static void RemoveSeries(MetricsRegistry* metrics, const std::string& model, int64_t version);

 private:
  // Called with mu_ held after a change of state: the gauge and the transition counter.
  void Published(BreakerState after);

  const std::string model_;
  const int64_t version_;
  mutable std::mutex mu_;
  CircuitBreaker breaker_;  // guarded by mu_
  Gauge* state_gauge_;
  Counter* rejected_;
  Counter* to_open_;
  Counter* to_half_open_;
  Counter* to_closed_;
};

}  // namespace weft
