#pragma once

#include <chrono>
#include <cstdint>

#include "loadgen/bench_options.h"
#include "loadgen/deterministic_random.h"

namespace weft {

// When open-loop requests are due, as offsets from the start of the run: every 1/rate (constant), or with
// exponential gaps of mean 1/rate (Poisson, the arrivals of many independent clients). Pure: no clock, so tests
// check it without threads or sleeps. Thread-compatible.
class ArrivalSchedule {
 public:
  struct Options {
    double rate_per_s = 1;  // > 0
    Arrivals arrivals = Arrivals::kConstant;
    uint64_t seed = 1;  // Poisson only
    // Added to every offset. Workers that split one rate between them use phases 0, 1/R, 2/R, ... so that
    // their constant schedules interleave into one even schedule.
    std::chrono::nanoseconds phase{0};
  };

  explicit ArrivalSchedule(Options options);

  // The offset of the next arrival; the first call gives the first. Offsets never decrease.
  std::chrono::nanoseconds Next();

 private:
  Options options_;
  DeterministicRandom random_;
  uint64_t index_ = 0;  // constant: offsets come from the index, so that rounding never accumulates
  double poisson_s_ = 0;
};

}  // namespace weft
