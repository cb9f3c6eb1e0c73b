#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "tensor/tensor.h"
#include "trace/tracer.h"

namespace weft {

// The longest timeout anything takes, in microseconds: a year. A request's `timeout` is clamped to it and a config's
// queue timeouts are checked against it, so that arrival + timeout cannot overflow steady_clock's nanoseconds.
inline constexpr uint64_t kMaxTimeoutMicros = uint64_t{365} * 24 * 3600 * 1000000;

using ParameterValue = std::variant<bool, int64_t, double, std::string>;
using Parameters = std::map<std::string, ParameterValue>;

// Keeps a callback registered with a CancelToken. Destroying it deregisters the callback; if the callback is
// running on another thread at that moment, the destructor waits for it to return, so never destroy a
// registration while holding a lock that its callback takes. Thread-compatible; not copyable or movable.
class CancelRegistration {
 public:
  CancelRegistration(const std::stop_token& token, std::function<void()> callback)
      : callback_(token, std::move(callback)) {}

 private:
  std::stop_callback<std::function<void()>> callback_;
};

// Set by whoever can tell that nobody waits for a request's answer any more (a client disconnect, a gRPC
// cancel). The scheduler registers a callback so that a queued request leaves its queue at once. Thread-safe.
class CancelToken {
 public:
  CancelToken() = default;
  CancelToken(const CancelToken&) = delete;
  CancelToken& operator=(const CancelToken&) = delete;

  // Idempotent. The first call runs the registered callbacks on this thread before it returns.
  void Cancel() { source_.request_stop(); }
  bool cancelled() const { return source_.stop_requested(); }

  // Registers `callback` to run once when the token is cancelled, on the cancelling thread; when the token is
  // already cancelled it runs now, on this thread, before OnCancel returns. The callback stays registered until
  // the returned handle is destroyed, so a finished request's callback never fires later.
  [[nodiscard]] std::unique_ptr<CancelRegistration> OnCancel(std::function<void()> callback) const {
    return std::make_unique<CancelRegistration>(source_.get_token(), std::move(callback));
  }

 private:
  std::stop_source source_;
};

// One inference request as the engine sees it, independent of the protocol it came in on.
struct InferenceRequest {
  std::string model_name;
  int64_t model_version = 0;  // 0 = chosen by the version policy (the highest ready version)
  std::string id;
  Parameters parameters;
  std::vector<Tensor> inputs;                  // shapes include the batch dimension when the model batches
  std::vector<std::string> requested_outputs;  // empty = all outputs
  // Requested outputs to answer as their top classes (Triton's classification extension, model/classification.h):
  // output name -> how many classes (> 0).
  std::map<std::string, uint32_t> class_counts;
  uint32_t priority = 0;  // 0 = the model's default; 1 = highest
  std::optional<SteadyTime> deadline;
  std::shared_ptr<CancelToken> cancel = std::make_shared<CancelToken>();
  SteadyTime arrival = std::chrono::steady_clock::now();
  // No client waits for the answer (a rollout's shadow copy): a batch of such requests alone runs on capacity
  // that nothing else wants (the device's background stream), so it never takes a core from requests that answer
  // clients.
  bool background = false;
  // Set when the request is sampled for tracing (Tracer::MaybeStart); every stage it passes stamps it.
  std::shared_ptr<RequestTrace> trace;
};

struct InferenceResponse {
  std::string model_name;  // the model that answered: a fallback's name when a fallback did
  int64_t model_version = 0;
  std::string id;
  std::vector<Tensor> outputs;
  // Sent as the response's "parameters" (both protocols), as strings: "weft_fallback_from" names the model and
  // version that should have answered when a fallback did, "weft_fallback_reason" why.
  std::map<std::string, std::string> parameters;
};

// Fires exactly once per submitted request, with a response or an error. May run on any thread; must not block.
using InferenceCallback = std::function<void(Result<InferenceResponse>)>;

}  // namespace weft
