#pragma once

#include <functional>
#include <stop_token>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "model/backend.h"
#include "tensor/tensor.h"

namespace weft {

// When an execution ran: on a device, the interval its stream was busy with it.
struct ExecutionTiming {
  SteadyTime start;
  SteadyTime end;
  // Where it ran, for traces; null when unknown. Valid during the completion callback.
  const std::string* stream = nullptr;
  const std::string* device = nullptr;
};
using ExecutionDone = std::function<void(Result<std::vector<Tensor>> outputs, const ExecutionTiming& timing)>;

// What the scheduler knows of a batch as it submits it.
struct BatchHints {
  // No client waits for any of its requests (InferenceRequest::background), so it may run on capacity nothing else
  // wants.
  bool background = false;
  // One request, nothing queued behind it for the instance, and recent batches of about one request: requests come
  // one at a time, and the submitting thread has nothing to do until the next one, so it may as well run the
  // completion itself. Not under load: there the device's completion thread answers a batch while this thread
  // forms the next one, and the slot that the answering batch still holds lets the next batch grow (at 64
  // connections on the peers' MLP, completing lone batches on the instance's thread made batches 4-7% smaller and
  // cost 4-6% of the throughput; docs/benchmarks.md).
  bool lone = false;
};

// Where the batches of one instance run. The scheduler takes a slot before it pops a batch, so a busy or gated
// instance leaves its requests in the queue, where they can still join a larger batch, expire or be cancelled.
// The engine gives each instance a lane of the multiplexer (a device stream, a bound on batches in flight);
// without one, the scheduler runs batches on the instance's own thread (InlineExecutor).
class InstanceExecutor {
 public:
  virtual ~InstanceExecutor() = default;
  // A slot for one more batch in flight, now or never (false).
  virtual bool TryAcquireSlot() = 0;
  // Blocks until a slot is free or `stop` is requested (false).
  virtual bool AcquireSlot(std::stop_token stop) = 0;
  // Gives back a slot that was not used.
  virtual void ReleaseSlot() = 0;
  // Uses a slot: runs the instance on `inputs` after every batch submitted before, and calls `done` exactly once,
  // on any thread, with the outputs (complete by then). The slot is free again once `done` has returned. May run
  // the batch, and call `done`, on the calling thread before it returns.
  virtual void Submit(std::vector<Tensor> inputs, ExecutionDone done, BatchHints hints) = 0;
};

// Runs each batch at once on the calling thread; one batch at a time per instance by construction (the caller
// returns from Submit only after `done`). Thread-compatible.
class InlineExecutor final : public InstanceExecutor {
 public:
  explicit InlineExecutor(ModelInstance* instance) : instance_(instance) {}
  bool TryAcquireSlot() override { return true; }
  bool AcquireSlot(std::stop_token stop) override { return !stop.stop_requested(); }
  void ReleaseSlot() override {}
  void Submit(std::vector<Tensor> inputs, ExecutionDone done, BatchHints /*hints*/) override {
    const SteadyTime start = std::chrono::steady_clock::now();
    Result<std::vector<Tensor>> outputs = instance_->Execute(inputs);
    const SteadyTime end = std::chrono::steady_clock::now();
    inputs.clear();  // release the request bytes as soon as the backend is done
    done(std::move(outputs), {start, end});
  }

 private:
  ModelInstance* const instance_;
};

}  // namespace weft
