#pragma once

#include <atomic>
#include <cstddef>

namespace weft {

// The bytes of responses that a server has started to write and not finished writing, over all its connections,
// against a bound. A response that would take the total past the bound is refused, except one of at most
// `always_allowed` bytes (errors, health answers: refusing them saves nothing) and one that would be the only
// response held (so that a response larger than the bound can still be served, alone). Thread-safe.
class UnsentBytes {
 public:
  // `bound` 0 = no bound.
  UnsentBytes(size_t bound, size_t always_allowed) : bound_(bound), always_allowed_(always_allowed) {}

  // Counts `bytes` until Release and returns true, or returns false and counts nothing.
  bool TryReserve(size_t bytes);
  void Release(size_t bytes);
  // At or past the bound: any response over `always_allowed` bytes would be refused now, so the caller may skip
  // building one.
  bool Saturated() const;
  size_t held() const { return held_.load(std::memory_order_relaxed); }
  size_t bound() const { return bound_; }

 private:
  const size_t bound_;
  const size_t always_allowed_;
  std::atomic<size_t> held_{0};
};

}  // namespace weft
