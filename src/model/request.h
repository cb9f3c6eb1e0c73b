#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "tensor/tensor.h"

namespace weft {

using ParameterValue = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, ParameterValue>;

// Set by whoever can tell that nobody waits for a request's answer any more (a client disconnect, a gRPC
// cancel). Read by the engine before work starts. Thread-safe.
class CancelToken {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_release); }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  std::atomic<bool> cancelled_{false};
};

// One inference request as the engine sees it, independent of the protocol it came in on.
struct InferenceRequest {
  std::string model_name;
  int64_t model_version = 0;        // 0 = chosen by the version policy (the highest ready version)
  std::string id;
  Parameters parameters;
  std::vector<Tensor> inputs;       // shapes include the batch dimension when the model batches
  std::vector<std::string> requested_outputs;  // empty = all outputs
  uint32_t priority = 0;            // 0 = the model's default; 1 = highest
  std::optional<SteadyTime> deadline;
  std::shared_ptr<CancelToken> cancel = std::make_shared<CancelToken>();
  SteadyTime arrival = std::chrono::steady_clock::now();
};

struct InferenceResponse {
  std::string model_name;
  int64_t model_version = 0;
  std::string id;
  std::vector<Tensor> outputs;
};

// Fires exactly once per submitted request, with a response or an error. May run on any thread; must not block.
using InferenceCallback = std::function<void(Result<InferenceResponse>)>;

}  // namespace weft
