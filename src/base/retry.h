#pragma once

#include <chrono>
#include <cstdint>

#include "base/clock.h"

namespace weft {

// The wait between tries of an operation that keeps failing the same way for a while (an accept out of
// descriptors: EMFILE, ENFILE, ENOBUFS). Retrying at once spins a core and floods the log while nothing changes;
// waiting lets the resource free up. The wait doubles from `initial` to `max` while failures go on, and a success
// starts over. Pure (no clock, no thread); not thread-safe: one loop uses it.
class Backoff {
 public:
  struct Options {
    std::chrono::milliseconds initial{5};
    std::chrono::milliseconds max{1000};
  };

  Backoff() : Backoff(Options{}) {}
  explicit Backoff(Options options) : options_(options) {}

  // Records a failure; returns how long to wait before the next try.
  std::chrono::milliseconds Failed();
  // Records a success; returns the number of failures since the previous success.
  uint64_t Succeeded();
  uint64_t failures() const { return failures_; }

 private:
  const Options options_;
  uint64_t failures_ = 0;
  std::chrono::milliseconds next_{0};
};

// Lets one log line through per `interval` for an event that may repeat thousands of times a second; the line
// that goes through tells how many were held back before it. Pure; not thread-safe.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // Whether an event at `now` is logged. When it is, `*held_back` is the number of events not logged since the
  // previous line.
  bool Allow(SteadyTime now, uint64_t* held_back);

 private:
  const std::chrono::steady_clock::duration interval_;
  bool logged_once_ = false;
  SteadyTime last_{};
  uint64_t held_back_ = 0;
};

}  // namespace weft

namespace weft {

// One descriptor held in reserve for the moment accept(2) runs out of them (EMFILE): given up, it lets the server
// accept and close the connections waiting in the listen backlog, so that their clients learn at once instead of
// timing out there; then it is taken back. Not thread-safe: one accept loop uses it.
class SpareDescriptor {
 public:
  SpareDescriptor();  // holds one descriptor (of /dev/null) when one is free
  ~SpareDescriptor();
  SpareDescriptor(const SpareDescriptor&) = delete;
  SpareDescriptor& operator=(const SpareDescriptor&) = delete;

  // Gives the spare up, accepts and closes up to `max` connections waiting on the non-blocking `listen_fd`, and
  // takes a spare again. Returns the connections closed; 0 when no spare was held.
  uint64_t ShedBacklog(int listen_fd, int max);
  // Takes a spare again if the last try could not (call after a successful accept).
  void Refill();

 private:
  int fd_ = -1;
};

}  // namespace weft
