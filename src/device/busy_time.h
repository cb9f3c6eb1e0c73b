#pragma once

#include <chrono>
#include <deque>

#include "base/clock.h"

namespace weft {

// The union of busy intervals, kept merged: overlapping or touching intervals become one, so a saturated stream
// costs one entry however many pieces of work it ran. Busy fraction over a window = Covered(window) / window, which
// is what NVML's "utilization" means (some work was running), but exact and per stream or per model
// (docs/metrics.md). Intervals may arrive out of order (from several streams). Not thread-safe.
class BusyTime {
 public:
  // Intervals that ended more than `horizon` before the latest end seen are dropped.
  explicit BusyTime(SteadyTime::duration horizon = std::chrono::seconds(10)) : horizon_(horizon) {}

  void Add(SteadyTime start, SteadyTime end);
  // The busy time inside [from, to].
  SteadyTime::duration Covered(SteadyTime from, SteadyTime to) const;
  // Covered(from, to) / (to - from); 0 for an empty window.
  double Fraction(SteadyTime from, SteadyTime to) const;
  // Busy time added since construction, counting each instant once (time dropped by the horizon stays counted).
  SteadyTime::duration total() const { return total_; }
  size_t intervals() const { return intervals_.size(); }

 private:
  const SteadyTime::duration horizon_;
  struct Interval {
    SteadyTime start, end;
  };
  // Sorted by start; disjoint and not touching. A deque, not a map: intervals arrive in about the order of time,
  // so an Add lands at the back and the horizon drops from the front, without a node allocated per batch.
  std::deque<Interval> intervals_;
  // The first interval that starts after `t`.
  std::deque<Interval>::const_iterator FirstStartingAfter(SteadyTime t) const;
  SteadyTime latest_end_{};
  SteadyTime::duration total_{0};
};

}  // namespace weft
