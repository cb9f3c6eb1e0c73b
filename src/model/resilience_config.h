#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "model/model_config.h"

namespace weft {

// A model's resilience settings, parsed once from its config's `parameters` (string values, as Triton's config
// gives them). Plain values, thread-compatible.

// The circuit breaker of each version of the model (src/resilience/circuit_breaker.h). Every field's parameter
// key is given beside it; the ranges are BreakerLimits'.
struct BreakerOptions {
  bool enabled = true;  // weft.breaker.enabled ("true" / "false")
  // weft.breaker.window_calls: count-based sliding window of the last N calls.
  uint32_t window_calls = 50;
  // weft.breaker.window_ms: > 0 = time-based window (the calls of the last window_ms) instead of count-based.
  std::chrono::milliseconds window{0};
  // weft.breaker.minimum_calls: no rate decision with fewer calls in the window (at most window_calls when the
  // window is count-based).
  uint32_t minimum_calls = 20;
  // weft.breaker.failure_rate: open when failures / calls >= this, in (0, 1].
  double failure_rate = 0.5;
  // weft.breaker.consecutive_failures: open after this many failures in a row whatever the window says; 0 = off.
  uint32_t consecutive_failures = 5;
  // weft.breaker.open_ms: the first open period.
  std::chrono::milliseconds open_duration{5000};
  // weft.breaker.max_open_ms: each reopening from half-open doubles the open period, up to this (>= open_ms).
  std::chrono::milliseconds max_open_duration{60000};
  // weft.breaker.half_open_probes: the calls admitted in half-open; all must succeed to close.
  uint32_t half_open_probes = 3;

  friend bool operator==(const BreakerOptions&, const BreakerOptions&) = default;
};

struct BreakerLimits {
  static constexpr uint32_t kMaxWindowCalls = 10000;  // also the bound of minimum_calls and consecutive_failures
  static constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(1);  // window, open periods
  static constexpr uint32_t kMaxHalfOpenProbes = 1000;
};

struct ResilienceConfig {
  BreakerOptions breaker;
  // weft.fallback_models: "a, b" -> {"a", "b"}, in the order they are tried. Names are not checked against the
  // repository here (a fallback may load later); CheckFallbackCompatible (src/resilience) checks the pair.
  std::vector<std::string> fallback_models;
  // weft.degrade_to: the cheaper model a request goes to when this one's expected latency would make it miss its
  // deadline; empty = none. Checked like a fallback.
  std::string degrade_to;
  // weft.execution_timeout_ms: an execution that runs longer answers its requests with an error at this limit, and
  // its instance is replaced (Scheduler::Options::execution_timeout); 0 = no limit. At most an hour.
  std::chrono::milliseconds execution_timeout{0};

  friend bool operator==(const ResilienceConfig&, const ResilienceConfig&) = default;
};

// Parses the "weft.breaker.*", "weft.fallback_models", "weft.degrade_to" and "weft.execution_timeout_ms" parameters;
// absent ones keep their defaults. Numbers are parsed strictly (the whole value, surrounding whitespace aside; no sign,
// no trailing characters, no overflow). InvalidArgument naming the parameter for a malformed or out-of-range value, for
// an unknown key that starts with "weft.breaker." (a typo must not silently leave the default), and for a fallback list
// with an empty name, a duplicate or the model itself, and for a weft.degrade_to that names the model itself or more
// than one model. An empty (or all-blank) weft.fallback_models is an empty list. Messages quote at most 64 bytes of any
// value or key. ValidateModelConfig calls this, so a config that loaded parses.
Result<ResilienceConfig> ParseResilienceConfig(const ModelConfig& config);

// The ranges above and the rules between fields (minimum_calls <= window_calls for a count-based window,
// max_open_duration >= open_duration). InvalidArgument naming the parameter otherwise. CircuitBreaker checks its
// options with it.
Status ValidateBreakerOptions(const BreakerOptions& options);

}  // namespace weft
