#pragma once

#include <chrono>
#include <cstdint>

namespace weft {

// What a scheduler has measured of its recent executions and what is waiting now: enough to estimate how long a
// request submitted now would take to be answered.
struct LoadSnapshot {
  uint64_t queued = 0;                         // requests waiting in the queue
  uint64_t instances = 1;                      // that serve the queue, each one batch at a time
  uint64_t running = 0;                        // executions under way
  double mean_batch = 0;                       // requests per execution, averaged over the recent ones; 0 = none yet
  std::chrono::nanoseconds mean_execution{0};  // duration of an execution, averaged; 0 = none measured yet
};

// The time from now until a request submitted now is answered: what is left of the executions under way when every
// instance is busy (half of one, on average), the rounds that drain the queue ahead of it (`instances` batches of
// mean_batch requests at a time), then its own execution. Measured, not guessed: zero until an execution has been
// measured, so that nothing is decided on no data. Pure.
std::chrono::nanoseconds ExpectedLatency(const LoadSnapshot& load);

// Exponentially weighted mean: the new sample weighs `weight` in (0, 1]; the first sample (mean 0) is taken as it is.
double UpdateMean(double mean, double sample, double weight);

}  // namespace weft
