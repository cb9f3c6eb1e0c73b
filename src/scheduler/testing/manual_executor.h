#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <utility>
#include <vector>

#include "model/backend.h"
#include "scheduler/instance_executor.h"

namespace weft::testing {

// An executor with one slot whose batches complete when the test says so, from the test's thread, as a device's
// completion thread would.
class ManualExecutor : public InstanceExecutor {
 public:
  explicit ManualExecutor(ModelInstance* instance) : instance_(instance) {}
  bool TryAcquireSlot() override {
    std::lock_guard lock(mu_);
    if (busy_) return false;
    busy_ = true;
    return true;
  }
  bool AcquireSlot(std::stop_token stop) override {
    std::unique_lock lock(mu_);
    if (!cv_.wait(lock, stop, [this] { return !busy_; })) return false;
    busy_ = true;
    return true;
  }
  void ReleaseSlot() override {
    std::lock_guard lock(mu_);
    busy_ = false;
    cv_.notify_all();
  }
  void Submit(std::vector<Tensor> inputs, ExecutionDone done, BatchHints hints) override {
    std::lock_guard lock(mu_);
    last_hints_ = hints;
    pending_.emplace_back(std::move(inputs), std::move(done));
    cv_.notify_all();
  }
  // What the scheduler said of the latest submitted batch.
  BatchHints last_hints() {
    std::lock_guard lock(mu_);
    return last_hints_;
  }
  bool last_background() { return last_hints().background; }
  bool WaitForSubmitted() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !pending_.empty(); });
  }
  // Runs and completes the oldest submitted batch; false if none came within 10 s.
  bool CompleteOne() {
    std::pair<std::vector<Tensor>, ExecutionDone> batch;
    {
      std::unique_lock lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return !pending_.empty(); })) return false;
      batch = std::move(pending_.front());
      pending_.erase(pending_.begin());
    }
    const SteadyTime now = std::chrono::steady_clock::now();
    batch.second(instance_->Execute(batch.first), {now, now});
    ReleaseSlot();
    return true;
  }

 private:
  ModelInstance* const instance_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool busy_ = false;                                                   // guarded by mu_
  BatchHints last_hints_;                                               // guarded by mu_
  std::vector<std::pair<std::vector<Tensor>, ExecutionDone>> pending_;  // guarded by mu_
};

}  // namespace weft::testing
