#include "frontend/grpc/work_queue.h"

#include "base/thread_name.h"

namespace weft {

WorkQueue::WorkQueue(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this](std::stop_token stop) {
      SetCurrentThreadName("grpc-encode");
      Run(stop);
    });
  }
}

WorkQueue::~WorkQueue() {
  threads_.clear();  // requests stop (which wakes the waits) and joins
}

void WorkQueue::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void WorkQueue::Run(std::stop_token stop) {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      // Drains before it stops: a posted task finishes a call that a client waits for.
      if (!ready_.wait(lock, stop, [&] { return !tasks_.empty(); })) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace weft
