#include "device/completion_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/thread_name.h"

namespace weft {
namespace {

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

// Reads and resets an eventfd's counter; 0 when it was not signalled (EAGAIN).
uint64_t Drain(int fd) {
  uint64_t count = 0;
  ssize_t n;
  do {
    n = ::read(fd, &count, sizeof(count));
  } while (n < 0 && errno == EINTR);
  return n == sizeof(count) ? count : 0;
}

}  // namespace

CompletionLoop::Source::~Source() {
  loop_->Deregister(id_);
  ::close(fd_);
}

void CompletionLoop::Source::Signal() const {
  const uint64_t one = 1;
  ssize_t n;
  do {
    n = ::write(fd_, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
  // EAGAIN means the counter is at its maximum: the loop has not caught up with 2^64-2 signals, which cannot
  // happen; any other error is a closed descriptor, a bug.
}

Result<std::unique_ptr<CompletionLoop>> CompletionLoop::Create(std::string name) {
  int epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Errno("epoll_create1");
  int stop_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    Status s = Errno("eventfd");
    ::close(epoll_fd);
    return s;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = 0;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, stop_fd, &ev) != 0) {
    Status s = Errno("epoll_ctl");
    ::close(stop_fd);
    ::close(epoll_fd);
    return s;
  }
  return std::unique_ptr<CompletionLoop>(new CompletionLoop(std::move(name), epoll_fd, stop_fd));
}

CompletionLoop::CompletionLoop(std::string name, int epoll_fd, int stop_fd)
    : name_(std::move(name)), epoll_fd_(epoll_fd), stop_fd_(stop_fd) {
  thread_ = std::jthread([this] {
    SetCurrentThreadName("completions");
    Run();
  });
}

CompletionLoop::~CompletionLoop() {
  {
    std::lock_guard lock(mu_);
    WEFT_CHECK(entries_.empty()) << "completion loop '" << name_ << "' destroyed with " << entries_.size()
                                 << " sources still registered";
  }
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof(one));
  thread_.join();
  ::close(stop_fd_);
  ::close(epoll_fd_);
}

Result<std::unique_ptr<CompletionLoop::Source>> CompletionLoop::Register(std::function<void(uint64_t)> handler) {
  int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return Errno("eventfd");
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    Status s = Errno("epoll_ctl");
    ::close(fd);
    return s;
  }
  entries_[id] = std::make_shared<Entry>(Entry{fd, std::move(handler)});
  return std::unique_ptr<Source>(new Source(this, fd, id));
}

void CompletionLoop::Deregister(uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  entries_.erase(it);
  // From inside its own handler the loop thread holds the entry alive itself; anywhere else, wait so that the
  // handler's captures outlive its last call.
  if (!InLoopThread()) handler_done_.wait(lock, [&] { return running_ != id; });
}

void CompletionLoop::Run() {
  thread_id_.store(std::this_thread::get_id());
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (true) {
    int n = ::epoll_wait(epoll_fd_, events, kMaxEvents, /*timeout=*/-1);
    if (n < 0) {
      if (errno == EINTR) continue;
      WEFT_LOG(Error) << "completion loop '" << name_ << "': epoll_wait: " << std::strerror(errno);
      return;
    }
    wakeups_.fetch_add(1, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == 0) return;  // stop
      std::shared_ptr<Entry> entry;
      uint64_t signals = 0;
      {
        std::lock_guard lock(mu_);
        auto it = entries_.find(id);
        if (it == entries_.end()) continue;  // deregistered after epoll_wait returned
        entry = it->second;
        // Read under mu_: Deregister erases the entry before its descriptor is closed, so the fd is still ours.
        signals = Drain(entry->fd);
        if (signals == 0) continue;
        running_ = id;
      }
      entry->handler(signals);
      {
        std::lock_guard lock(mu_);
        running_ = 0;
      }
      handler_done_.notify_all();
    }
  }
}

}  // namespace weft
