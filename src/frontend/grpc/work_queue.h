#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {

// A few threads that run posted tasks in order of arrival. The gRPC frontend builds large responses here, so
// that the engine's threads (which deliver results) go back to inference at once. Thread-safe. The destructor
// runs what is already posted, then joins.
class WorkQueue {
 public:
  explicit WorkQueue(int threads);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Post(std::function<void()> task);

 private:
  void Run(std::stop_token stop);

  std::mutex mu_;
  std::condition_variable_any ready_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  std::vector<std::jthread> threads_;        // started last, joined first
};

}  // namespace weft
