#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>

#include "base/clock.h"

namespace weft {

// The measured load of a stream (or of one instance's batches): an exponentially weighted moving average, with
// time constant `tau`, of the intervals added. Each interval adds its length / tau and the sum decays by
// exp(-dt / tau). Fed each batch's time on the stream (waiting included), it reads the average number of batches
// there: about 1 for a stream kept busy by one instance, more when others wait behind it, towards 0 when idle.
// Pure arithmetic; not thread-safe.
class StreamLoad {
 public:
  explicit StreamLoad(SteadyTime::duration tau = std::chrono::seconds(1)) : tau_(Seconds(tau)) {}

  // Adds the interval [start, end]; intervals may overlap.
  void Add(SteadyTime start, SteadyTime end) {
    if (end <= start) return;
    DecayTo(end);
    value_ += Seconds(end - start) / tau_;
  }
  // The load at `now` (later than every interval added so far, or the value stays as it was).
  double At(SteadyTime now) const {
    if (now <= at_) return value_;
    return value_ * std::exp(-Seconds(now - at_) / tau_);
  }
  // Moves `delta` of load in or out at `now` (never below 0): what an instance that moves between streams takes
  // with it, so that the next decision sees the move before the averages catch up.
  void Shift(double delta, SteadyTime now) {
    DecayTo(now);
    value_ = std::max(0.0, value_ + delta);
  }

 private:
  static double Seconds(SteadyTime::duration d) { return std::chrono::duration<double>(d).count(); }
  void DecayTo(SteadyTime t) {
    if (t > at_) {
      value_ = At(t);
      at_ = t;
    }
  }

  const double tau_;
  double value_ = 0;
  SteadyTime at_{};
};

}  // namespace weft
