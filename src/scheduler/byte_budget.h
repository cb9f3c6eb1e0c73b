#pragma once

#include <atomic>
#include <cstddef>
#include <optional>
#include <utility>

namespace weft {

class ByteReservation;

// A server-wide budget of bytes held by queued requests, shared by the schedulers of every model so that a
// burst cannot queue without bound however many models it spreads over. Lock-free, thread-safe; it must
// outlive every reservation taken from it.
class ByteBudget {
 public:
  explicit ByteBudget(size_t capacity) : capacity_(capacity) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Takes `bytes` if they fit in what is left and returns true; otherwise takes nothing and returns false.
  bool TryAcquire(size_t bytes) {
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Gives back bytes taken by TryAcquire.
  void Release(size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  // TryAcquire as a handle that gives the bytes back when destroyed; nullopt when they do not fit.
  std::optional<ByteReservation> TryReserve(size_t bytes);

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const size_t capacity_;
  std::atomic<size_t> used_{0};
};

// Bytes taken from a ByteBudget, given back when destroyed or reset. An empty reservation holds nothing.
// Move-only; thread-compatible.
class ByteReservation {
 public:
  ByteReservation() = default;
  ByteReservation(ByteReservation&& other) noexcept
      : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ByteReservation& operator=(ByteReservation&& other) noexcept {
    if (this != &other) {
      Reset();
      budget_ = std::exchange(other.budget_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~ByteReservation() { Reset(); }

  size_t bytes() const { return bytes_; }
  void Reset() {
    if (budget_) budget_->Release(bytes_);
    budget_ = nullptr;
    bytes_ = 0;
  }

 private:
  friend class ByteBudget;
  ByteReservation(ByteBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}

  ByteBudget* budget_ = nullptr;
  size_t bytes_ = 0;
};

inline std::optional<ByteReservation> ByteBudget::TryReserve(size_t bytes) {
  if (!TryAcquire(bytes)) return std::nullopt;
  return ByteReservation(this, bytes);
}

}  // namespace weft
