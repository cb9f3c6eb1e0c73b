#include "frontend/http/unsent_bytes.h"

namespace weft {

bool UnsentBytes::TryReserve(size_t bytes) {
  size_t held = held_.load(std::memory_order_relaxed);
  for (;;) {
    bool fits = bound_ == 0 || bytes <= always_allowed_ || held == 0 || held + bytes <= bound_;
    if (!fits) return false;
    if (held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed)) return true;
  }
}

void UnsentBytes::Release(size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

bool UnsentBytes::Saturated() const { return bound_ != 0 && held() >= bound_; }

}  // namespace weft
