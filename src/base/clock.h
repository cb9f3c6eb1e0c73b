#pragma once

#include <atomic>
#include <chrono>

namespace weft {

using SteadyTime = std::chrono::steady_clock::time_point;
using Micros = std::chrono::microseconds;

// Time source for decisions, so that policies are testable with a manual clock. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime Now() const = 0;
};

class RealClock final : public Clock {
 public:
  SteadyTime Now() const override { return std::chrono::steady_clock::now(); }
  static const RealClock& Instance() {
    static const RealClock clock;
    return clock;
  }
};

// A clock that only moves when told to. For tests.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(SteadyTime start = SteadyTime{}) : now_(start.time_since_epoch().count()) {}
  SteadyTime Now() const override { return SteadyTime(SteadyTime::duration(now_.load())); }
  void Advance(std::chrono::nanoseconds d) {
    now_.fetch_add(std::chrono::duration_cast<SteadyTime::duration>(d).count());
  }

 private:
  std::atomic<SteadyTime::duration::rep> now_;
};

}  // namespace weft
