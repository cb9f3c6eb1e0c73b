#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/backend.h"
#include "model/request.h"

namespace weft::testing {

// Holds executions until opened, so that a test decides when an instance is free. Thread-safe.
class Gate {
 public:
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Holds the executions that reach it from now on.
  void Close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// A ModelInstance for scheduler tests. Its one output "OUTPUT0" is its first FP32 input doubled (same shape).
// Each execution first waits at the gate, if one is set, then is logged. Records whether two executions ever
// overlapped, which the one-execution-per-instance contract forbids. Thread-safe.
class FakeInstance : public ModelInstance {
 public:
  struct Execution {
    std::vector<Shape> shapes;  // of the inputs it got
    std::vector<float> values;  // the first input's values
    std::thread::id thread;     // the thread that ran it
  };

  explicit FakeInstance(Gate* gate = nullptr) : gate_(gate) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    {
      std::lock_guard lock(mu_);
      if (running_) overlapped_ = true;
      running_ = true;
      ++started_;
      cv_.notify_all();
    }
    if (gate_) gate_->Wait();
    if (cost_) std::this_thread::sleep_for(cost_(inputs[0].shape().empty() ? 1 : inputs[0].shape()[0]));
    Execution e;
    e.thread = std::this_thread::get_id();
    for (const Tensor& t : inputs) e.shapes.push_back(t.shape());
    auto in = inputs[0].as<float>();
    e.values.assign(in.begin(), in.end());
    std::byte* out;
    Tensor t = Tensor::Allocate("OUTPUT0", DataType::kFp32, inputs[0].shape(), &out);
    for (size_t i = 0; i < in.size(); ++i) reinterpret_cast<float*>(out)[i] = 2 * in[i];
    std::lock_guard lock(mu_);
    log_.push_back(std::move(e));
    running_ = false;
    cv_.notify_all();
    return std::vector<Tensor>{t};
  }

  // How long an execution of a batch of `items` takes (it sleeps). Set before the first execution.
  void set_cost(std::function<std::chrono::microseconds(int64_t items)> cost) { cost_ = std::move(cost); }

  // Waits until `n` executions have started (they may still be at the gate); false on timeout.
  bool WaitForStarted(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return started_ >= n; });
  }
  int started() const {
    std::lock_guard lock(mu_);
    return started_;
  }
  // Executions that finished.
  std::vector<Execution> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  bool overlapped() const {
    std::lock_guard lock(mu_);
    return overlapped_;
  }

 private:
  Gate* const gate_;
  std::function<std::chrono::microseconds(int64_t items)> cost_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int started_ = 0;             // guarded by mu_
  bool running_ = false;        // guarded by mu_
  bool overlapped_ = false;     // guarded by mu_
  std::vector<Execution> log_;  // guarded by mu_
};

// A request with one FP32 input "INPUT0" of `shape` holding `values`.
inline std::unique_ptr<InferenceRequest> MakeFloatRequest(std::vector<float> values, Shape shape, std::string id = "") {
  auto r = std::make_unique<InferenceRequest>();
  r->model_name = "fake";
  r->id = std::move(id);
  std::vector<std::byte> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  r->inputs.push_back(Tensor::FromBytes("INPUT0", DataType::kFp32, std::move(shape), std::move(bytes)));
  return r;
}

}  // namespace weft::testing
