#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "model/resilience_config.h"

namespace weft {

// A circuit breaker: stops sending calls to a model version that keeps failing through its own fault, and lets a
// few probe calls through after a pause to see whether it recovered (docs: lifecycle_anchors.md section 3).
//
//   closed --(failure rate over the window, or N failures in a row)--> open
//   open --(open period over, at the next Admit)--> half_open
//   half_open --(every probe succeeded)--> closed       (window cleared, open period back to open_duration)
//   half_open --(a probe failed)--> open                (open period doubled, up to max_open_duration)

enum class BreakerState { kClosed, kOpen, kHalfOpen };

// "closed", "open", "half_open".
std::string_view BreakerStateName(BreakerState state);

enum class CallOutcome {
  kSuccess,
  kFailure,
  kIgnored,  // not the server's fault (or not a verdict on the model): counts for nothing
};

// Which results are the server's fault. kInternal and kOutOfMemory are failures; ok is a success; every other code
// (client errors, not found, cancellation, a deadline missed in the queue, a full queue, unavailable, aborted,
// unimplemented) is ignored: they say nothing about whether the model can execute.
CallOutcome ClassifyForBreaker(const Status& status);

// The state machine of one breaker. Its decisions are pure functions of its state and the `now` passed in; it
// never reads a clock. Times passed in may go backwards a little (callers read the clock before taking their
// lock): nothing breaks, an outcome older than a time-based window is dropped.
//
// Memory is O(window): a ring of window_calls outcomes (count-based), or 10 buckets of window/10 each
// (time-based, so a call is forgotten between 0.9 and 1 window after it happened, never later). Every operation
// is O(1).
//
// Half-open admission: at most half_open_probes probes are admitted in one half-open period. Once that many are
// admitted, further calls are refused until probes are decided: an ignored probe gives its slot back; a failed
// one reopens at once; when half_open_probes probes have succeeded the breaker closes. A probe outcome is counted
// for the current period while the period has probes in flight, and dropped otherwise (a probe from an earlier
// period, decided late).
//
// Thread-compatible, not thread-safe: the caller holds a mutex around every call.
class CircuitBreaker {
 public:
  // `options` must pass ValidateBreakerOptions (ParseResilienceConfig's output does); anything else is a bug.
  explicit CircuitBreaker(BreakerOptions options);

  struct Admission {
    bool admitted = false;
    bool probe = false;  // admitted as one of half-open's probes: Record must pass probe = true
    // When refused: how long until a retry may be admitted (at least 1 ms). While open, until the breaker
    // half-opens; while half-open with every probe slot taken, the current open period, as an estimate.
    std::chrono::milliseconds retry_after{0};
  };

  // Whether a call may go to the model now. Closed (or disabled): admits. Open: refuses until the open period
  // ends, then turns half-open and admits as half-open does. Half-open: admits probes as described above.
  Admission Admit(SteadyTime now);

  // The outcome of an admitted call, with the Admission's probe flag. Closed: adds to the window, and opens when
  // (calls in the window >= minimum_calls and failures / calls >= failure_rate) or when consecutive_failures
  // (> 0) failures came in a row. Half-open: a probe decides as described above; a non-probe outcome (a call
  // admitted before the breaker opened) is ignored. Open: every outcome is dropped. Ignored outcomes change
  // nothing except freeing a probe slot. Disabled: the window is kept (for logs) but the state stays closed.
  void Record(CallOutcome outcome, bool probe, SteadyTime now);

  BreakerState state() const { return state_; }
  // How many state changes so far (for a metric).
  uint64_t transitions() const { return transitions_; }
  const BreakerOptions& options() const { return options_; }
  // The open period in force: the last one begun, or the next one when closed.
  std::chrono::milliseconds open_period() const { return open_period_; }

  // For logs and the model index: the failures and calls in the window at `now` (count-based: `now` is unused).
  uint32_t window_failures(SteadyTime now) const;
  uint32_t window_calls(SteadyTime now) const;

 private:
  static constexpr int64_t kBuckets = 10;
  struct Bucket {
    int64_t index = 0;  // which bucket of time (now / bucket_width_) this holds; calls == 0 when never used
    uint32_t calls = 0;
    uint32_t failures = 0;
  };

  bool time_based() const { return options_.window.count() > 0; }
  int64_t BucketIndex(SteadyTime now) const;
  void AddToWindow(bool failure, SteadyTime now);
  void ClearWindow();
  void Open(SteadyTime now);
  void Close();
  void HalfOpen();

  // Constant after construction.
  const BreakerOptions options_;
  const SteadyTime::duration bucket_width_;  // time-based window only

  BreakerState state_ = BreakerState::kClosed;
  uint64_t transitions_ = 0;
  std::chrono::milliseconds open_period_;
  SteadyTime open_until_{};

  // Closed: the window and the failures in a row.
  uint32_t consecutive_failures_ = 0;
  std::vector<uint8_t> ring_;  // count-based: 1 = failure, the last `ring_calls_` outcomes ending at ring_next_
  size_t ring_next_ = 0;
  uint32_t ring_calls_ = 0;
  uint32_t ring_failures_ = 0;
  std::vector<Bucket> buckets_;  // time-based: bucket i of time lives at [i mod kBuckets]

  // Half-open: this period's probes.
  uint32_t probes_in_flight_ = 0;
  uint32_t probes_succeeded_ = 0;
};

}  // namespace weft
