#pragma once

#include <chrono>
#include <cmath>

#include "base/clock.h"

namespace weft {

// The measured load of a stream: an exponentially weighted moving average of its busy fraction, with time constant
// `tau`. Each busy interval adds its length / tau and the sum decays by exp(-dt / tau), so a stream busy all the
// time reads about 1 and an idle one decays towards 0. Pure arithmetic; not thread-safe.
class StreamLoad {
 public:
  explicit StreamLoad(SteadyTime::duration tau = std::chrono::seconds(1)) : tau_(Seconds(tau)) {}

  // Adds the busy interval [start, end].
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
