#include "base/retry.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

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

SpareDescriptor::SpareDescriptor() { Refill(); }

SpareDescriptor::~SpareDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

void SpareDescriptor::Refill() {
  if (fd_ < 0) fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

uint64_t SpareDescriptor::ShedBacklog(int listen_fd, int max) {
  if (fd_ < 0) return 0;
  ::close(fd_);
  fd_ = -1;
  uint64_t shed = 0;
  for (; shed < static_cast<uint64_t>(max); ++shed) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;  // the backlog is empty, or another thread took the freed descriptor
    ::close(fd);
  }
  Refill();
  return shed;
}

}  // namespace weft
