#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/result.h"

namespace weft {

// One thread that sleeps in epoll_wait on a set of eventfds and runs a source's handler when its eventfd is
// written. Nothing polls: with no signal the thread stays blocked in the kernel. A device delivers every completion
// of its streams here, so completions of one stream are seen in order, by one thread.
//
// Thread-safe. Destroy every Source before the loop.
class CompletionLoop {
 public:
  // An eventfd registered with the loop. Signal() is a single write(2): it may be called from any thread, also
  // from a CUDA host function (it calls no CUDA) or a signal handler.
  class Source {
   public:
    // Deregisters. If the handler is running on the loop thread right now, waits for it to return first, unless
    // called from that very handler.
    ~Source();
    Source(const Source&) = delete;
    Source& operator=(const Source&) = delete;

    void Signal() const;

   private:
    friend class CompletionLoop;
    Source(CompletionLoop* loop, int fd, uint64_t id) : loop_(loop), fd_(fd), id_(id) {}
    CompletionLoop* const loop_;
    const int fd_;
    const uint64_t id_;
  };

  // Starts the loop thread. Internal when the kernel refuses an epoll or eventfd descriptor.
  static Result<std::unique_ptr<CompletionLoop>> Create(std::string name);
  ~CompletionLoop();  // stops and joins the thread
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

  // `handler` runs on the loop thread after Signal(), with the number of signals since it last ran (signals that
  // arrive while it is pending are coalesced into one call).
  Result<std::unique_ptr<Source>> Register(std::function<void(uint64_t signals)> handler);

  bool InLoopThread() const { return std::this_thread::get_id() == thread_id_.load(); }
  // How often epoll_wait has returned with work. Tests use it to show that an idle loop does not wake.
  uint64_t wakeups() const { return wakeups_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

 private:
  struct Entry {
    int fd;
    std::function<void(uint64_t)> handler;
  };

  CompletionLoop(std::string name, int epoll_fd, int stop_fd);
  void Run();
  void Deregister(uint64_t id);

  // Constant after construction.
  const std::string name_;
  const int epoll_fd_;
  const int stop_fd_;

  std::atomic<uint64_t> wakeups_{0};
  std::atomic<std::thread::id> thread_id_;

  std::mutex mu_;
  std::condition_variable handler_done_;
  uint64_t next_id_ = 1;                                // guarded by mu_; 0 is the stop descriptor
  std::map<uint64_t, std::shared_ptr<Entry>> entries_;  // guarded by mu_
  uint64_t running_ = 0;                                // guarded by mu_; the source whose handler runs now

  std::jthread thread_;  // started last, joined first
};

}  // namespace weft
