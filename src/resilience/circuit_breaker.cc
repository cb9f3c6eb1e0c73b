#include "resilience/circuit_breaker.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "base/log.h"

namespace weft {

std::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed: return "closed";
    case BreakerState::kOpen: return "open";
    case BreakerState::kHalfOpen: return "half_open";
  }
  return "unknown";
}

CallOutcome ClassifyForBreaker(const Status& status) {
  // No default: a new code must be classified here (-Wswitch).
  switch (status.code()) {
    case StatusCode::kOk: return CallOutcome::kSuccess;
    case StatusCode::kInternal:
    case StatusCode::kOutOfMemory: return CallOutcome::kFailure;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kCancelled:
    case StatusCode::kAborted:
    case StatusCode::kUnimplemented:
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
    case StatusCode::kAlreadyExists: return CallOutcome::kIgnored;
  }
  return CallOutcome::kIgnored;
}

namespace {

SteadyTime::duration BucketWidth(const BreakerOptions& options) {
  const auto window = std::chrono::duration_cast<SteadyTime::duration>(options.window);
  return std::max(SteadyTime::duration(1), window / 10);
}

}  // namespace

CircuitBreaker::CircuitBreaker(BreakerOptions options)
    : options_(std::move(options)), bucket_width_(BucketWidth(options_)), open_period_(options_.open_duration) {
  const Status valid = ValidateBreakerOptions(options_);
  WEFT_CHECK(valid.ok()) << "CircuitBreaker options: " << valid.message();
  if (time_based()) {
    buckets_.resize(kBuckets);
  } else {
    ring_.resize(options_.window_calls);
  }
}

CircuitBreaker::Admission CircuitBreaker::Admit(SteadyTime now) {
  if (!options_.enabled) return Admission{.admitted = true};
  if (state_ == BreakerState::kOpen) {
    if (now < open_until_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(open_until_ - now);
      return Admission{.retry_after = std::max(left, std::chrono::milliseconds(1))};
    }
    HalfOpen();
  }
  if (state_ == BreakerState::kHalfOpen) {
    if (probes_in_flight_ + probes_succeeded_ >= options_.half_open_probes) {
      return Admission{.retry_after = open_period_};
    }
    ++probes_in_flight_;
    return Admission{.admitted = true, .probe = true};
  }
  return Admission{.admitted = true};
}

void CircuitBreaker::Record(CallOutcome outcome, bool probe, SteadyTime now) {
  switch (state_) {
    case BreakerState::kOpen: return;  // admitted before the breaker opened: the decision is made
    case BreakerState::kHalfOpen: {
      // A call admitted while closed, or a probe of an earlier period decided late, says nothing on this period.
      if (!probe || probes_in_flight_ == 0) return;
      --probes_in_flight_;  // an ignored probe gives its slot back
      if (outcome == CallOutcome::kSuccess) {
        if (++probes_succeeded_ >= options_.half_open_probes) Close();
      } else if (outcome == CallOutcome::kFailure) {
        open_period_ = std::min(open_period_ * 2, options_.max_open_duration);
        Open(now);
      }
      return;
    }
    case BreakerState::kClosed: break;
  }
  if (outcome == CallOutcome::kIgnored) return;
  const bool failure = outcome == CallOutcome::kFailure;
  consecutive_failures_ = failure ? consecutive_failures_ + 1 : 0;
  AddToWindow(failure, now);
  if (!options_.enabled) return;
  const bool in_a_row = options_.consecutive_failures > 0 && consecutive_failures_ >= options_.consecutive_failures;
  bool by_rate = false;
  const uint32_t calls = window_calls(now);
  if (calls >= options_.minimum_calls) {
    by_rate = static_cast<double>(window_failures(now)) / calls >= options_.failure_rate;
  }
  if (in_a_row || by_rate) Open(now);
}

uint32_t CircuitBreaker::window_failures(SteadyTime now) const {
  if (!time_based()) return ring_failures_;
  const int64_t current = BucketIndex(now);
  uint32_t failures = 0;
  for (const Bucket& b : buckets_) {
    if (b.calls > 0 && b.index > current - kBuckets) failures += b.failures;
  }
  return failures;
}

uint32_t CircuitBreaker::window_calls(SteadyTime now) const {
  if (!time_based()) return ring_calls_;
  const int64_t current = BucketIndex(now);
  uint32_t calls = 0;
  for (const Bucket& b : buckets_) {
    if (b.calls > 0 && b.index > current - kBuckets) calls += b.calls;
  }
  return calls;
}

int64_t CircuitBreaker::BucketIndex(SteadyTime now) const {
  const int64_t t = now.time_since_epoch().count();
  const int64_t w = bucket_width_.count();
  int64_t index = t / w;
  if (t % w < 0) --index;  // round towards minus infinity
  return index;
}

void CircuitBreaker::AddToWindow(bool failure, SteadyTime now) {
  if (!time_based()) {
    if (ring_calls_ == ring_.size()) {
      ring_failures_ -= ring_[ring_next_];
    } else {
      ++ring_calls_;
    }
    ring_[ring_next_] = failure ? 1 : 0;
    ring_failures_ += failure ? 1 : 0;
    ring_next_ = (ring_next_ + 1) % ring_.size();
    return;
  }
  const int64_t index = BucketIndex(now);
  Bucket& b = buckets_[static_cast<size_t>(((index % kBuckets) + kBuckets) % kBuckets)];
  if (b.calls == 0 || b.index < index) {
    b = Bucket{.index = index};
  } else if (b.index > index) {
    return;  // a whole window older than a call already recorded (a `now` from long ago): out of the window
  }
  // A bucket holds at most the calls of one bucket width; saturate rather than wrap on absurd rates.
  if (b.calls < std::numeric_limits<uint32_t>::max() / kBuckets) {
    ++b.calls;
    b.failures += failure ? 1 : 0;
  }
}

void CircuitBreaker::ClearWindow() {
  std::fill(ring_.begin(), ring_.end(), uint8_t{0});
  ring_next_ = 0;
  ring_calls_ = 0;
  ring_failures_ = 0;
  std::fill(buckets_.begin(), buckets_.end(), Bucket{});
  consecutive_failures_ = 0;
}

void CircuitBreaker::Open(SteadyTime now) {
  state_ = BreakerState::kOpen;
  ++transitions_;
  open_until_ = now + open_period_;
  probes_in_flight_ = 0;
  probes_succeeded_ = 0;
}

void CircuitBreaker::HalfOpen() {
  state_ = BreakerState::kHalfOpen;
  ++transitions_;
  probes_in_flight_ = 0;
  probes_succeeded_ = 0;
}

void CircuitBreaker::Close() {
  state_ = BreakerState::kClosed;
  ++transitions_;
  ClearWindow();
  open_period_ = options_.open_duration;
  probes_in_flight_ = 0;
  probes_succeeded_ = 0;
}

}  // namespace weft
