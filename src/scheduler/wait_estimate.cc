#include "scheduler/wait_estimate.h"

#include <algorithm>
#include <cmath>

namespace weft {

std::chrono::nanoseconds ExpectedLatency(const LoadSnapshot& load) {
  if (load.mean_execution.count() <= 0 || load.mean_batch <= 0) return std::chrono::nanoseconds(0);
  const double instances = static_cast<double>(std::max<uint64_t>(1, load.instances));
  const double per_round = std::max(1.0, load.mean_batch) * instances;
  const double execution = static_cast<double>(load.mean_execution.count());
  const double busy = static_cast<double>(load.running) >= instances ? 0.5 : 0.0;
  const double rounds = busy + std::floor(static_cast<double>(load.queued) / per_round) + 1;
  // A queue that would take more than a day: any answer that large decides the same.
  constexpr double kCap = 86400e9;
  return std::chrono::nanoseconds(static_cast<int64_t>(std::min(rounds * execution, kCap)));
}

double UpdateMean(double mean, double sample, double weight) {
  if (mean <= 0) return sample;
  return mean + weight * (sample - mean);
}

}  // namespace weft
