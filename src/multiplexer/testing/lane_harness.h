#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "backends/builtin/builtin_backend.h"
#include "device/device.h"
#include "multiplexer/multiplexer.h"

namespace weft::testing {

// Batch results by id, in completion order: the counter model's counts, the first value of a float output, the
// device timing, when the host saw them, and the first error. Thread-safe.
class BatchResults {
 public:
  BatchDone Callback(int id) {
    return [this, id](Result<std::vector<Tensor>> outputs, const BatchTiming& timing) {
      std::lock_guard lock(mu_);
      order_.push_back(id);
      timings_[id] = timing;
      seen_[id] = std::chrono::steady_clock::now();
      if (!outputs.ok()) {
        if (error_.empty()) error_ = outputs.status().ToString();
      } else if (!outputs->empty() && (*outputs)[0].type() == DataType::kInt64) {
        auto values = (*outputs)[0].as<int64_t>();
        counts_[id].assign(values.begin(), values.end());
      } else if (!outputs->empty() && (*outputs)[0].type() == DataType::kFp32) {
        first_[id] = (*outputs)[0].as<float>()[0];
      }
      cv_.notify_all();
    };
  }
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(20), [&] { return order_.size() >= n; });
  }
  std::vector<int> order() {
    std::lock_guard lock(mu_);
    return order_;
  }
  std::vector<int64_t> counts(int id) {
    std::lock_guard lock(mu_);
    return counts_[id];
  }
  float first(int id) {
    std::lock_guard lock(mu_);
    return first_[id];
  }
  BatchTiming timing(int id) {
    std::lock_guard lock(mu_);
    return timings_[id];
  }
  SteadyTime seen(int id) {
    std::lock_guard lock(mu_);
    return seen_[id];
  }
  bool ok() {
    std::lock_guard lock(mu_);
    return error_.empty();
  }
  std::string error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> order_;                      // guarded by mu_
  std::map<int, std::vector<int64_t>> counts_;  // guarded by mu_
  std::map<int, float> first_;                  // guarded by mu_
  std::map<int, BatchTiming> timings_;          // guarded by mu_
  std::map<int, SteadyTime> seen_;              // guarded by mu_
  std::string error_;                           // guarded by mu_
};

// A multiplexer on a device with builtin-model lanes, for the CPU and the CUDA tests of the multiplexer.
class LaneHarness : public ::testing::Test {
 protected:
  void StartOn(std::unique_ptr<Device> device, MultiplexerOptions options) {
    device_ = std::move(device);
    auto mux = Multiplexer::Create(device_.get(), options, &metrics_);
    ASSERT_TRUE(mux.ok()) << mux.status().ToString();
    mux_ = std::move(mux).value();
  }
  // A lane for a new builtin instance of `config`; null (and a test failure) when it cannot be made.
  Lane* Add(const ModelConfig& config) {
    auto instance = MakeBuiltinBackend()->CreateInstance(config, "", 0);
    EXPECT_TRUE(instance.ok()) << instance.status().ToString();
    if (!instance.ok()) return nullptr;
    instances_.push_back(std::move(instance).value());
    auto lane = mux_->AddInstance(config, 1, instances_.back().get());
    EXPECT_TRUE(lane.ok()) << lane.status().ToString();
    if (!lane.ok()) return nullptr;
    lanes_.push_back(std::move(lane).value());
    return lanes_.back().get();
  }
  void SubmitInputs(Lane* lane, int id, std::vector<Tensor> inputs, bool may_run_here = false,
                    bool background = false) {
    ASSERT_TRUE(lane->AcquireSlot(std::stop_token()));
    lane->Submit(std::move(inputs), results_.Callback(id), may_run_here ? OnSubmitter::kRun : OnSubmitter::kNothing,
                 background);
  }
  void TearDown() override {
    lanes_.clear();  // waits for their batches
    mux_.reset();
    device_.reset();
  }

  MetricsRegistry metrics_;
  BatchResults results_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<Multiplexer> mux_;
  std::vector<std::unique_ptr<ModelInstance>> instances_;
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace weft::testing
