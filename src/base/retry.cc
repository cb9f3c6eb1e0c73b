#include "base/retry.h"

#include <algorithm>

namespace weft {

std::chrono::milliseconds Backoff::Failed() {
  ++failures_;
  next_ = failures_ == 1 ? options_.initial : std::min(options_.max, next_ * 2);
  return next_;
}

uint64_t Backoff::Succeeded() {
  uint64_t failures = failures_;
  failures_ = 0;
  next_ = std::chrono::milliseconds(0);
  return failures;
}

bool LogRateLimiter::Allow(SteadyTime now, uint64_t* held_back) {
  if (logged_once_ && now - last_ < interval_) {
    ++held_back_;
    return false;
  }
  logged_once_ = true;
  last_ = now;
  *held_back = held_back_;
  held_back_ = 0;
  return true;
}

}  // namespace weft
