#include "loadgen/arrival_schedule.h"

#include <cmath>

namespace weft {

ArrivalSchedule::ArrivalSchedule(Options options) : options_(options), random_(options.seed) {}

std::chrono::nanoseconds ArrivalSchedule::Next() {
  double seconds = 0;
  if (options_.arrivals == Arrivals::kConstant) {
    seconds = static_cast<double>(index_++) / options_.rate_per_s;
  } else {
    // Inverse transform: -ln(1 - U) is exponential with mean 1; 1 - U is in (0, 1], so the log is finite.
    poisson_s_ += -std::log(1.0 - random_.NextUnit()) / options_.rate_per_s;
    seconds = poisson_s_;
  }
  return options_.phase + std::chrono::nanoseconds(std::llround(seconds * 1e9));
}

}  // namespace weft
