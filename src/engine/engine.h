#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "device/device.h"
#include "metrics/metrics.h"
#include "model/model_config.h"
#include "model/request.h"
#include "multiplexer/multiplexer.h"
#include "repository/repository.h"

namespace weft {

// The state of one model (or one version) as the protocol reports it.
struct ModelState {
  std::string name;
  int64_t version = 0;  // 0 for a model-level entry
  bool ready = false;
  std::string reason;  // why it is not ready
};

// The facade that frontends call: it owns the loaded models and runs requests on their instances.
// Thread-safe. Submit never blocks on inference.
class Engine {
 public:
  struct Options {
    // Queued requests per model version before Submit answers RESOURCE_EXHAUSTED. 0 = unbounded;
    // kDefaultQueueBound = DefaultQueueBound(config) for a model whose config bounds no level itself. The config's
    // dynamic_batching { default_queue_policy { max_queue_size } } bounds each priority level as well.
    static constexpr size_t kDefaultQueueBound = static_cast<size_t>(-1);
    size_t max_queue_per_model = 0;
    // Input bytes held by queued requests, over all models, before Submit answers RESOURCE_EXHAUSTED.
    // 0 = unbounded.
    size_t max_queued_bytes = 0;
    // The device batches run on: the engine puts a multiplexer on it and gives every instance a lane (a stream
    // of its model's priority class, a bound on batches in flight). Must outlive the engine. Null: each instance
    // runs its batches on its own scheduler thread, with no device layer.
    Device* device = nullptr;
    MultiplexerOptions multiplexer;
  };

  // Takes the repository's entries; starts a scheduler (one thread per instance and a timer) for every ready
  // version. A version whose instances cannot get a lane (a bad weft.max_inflight_batches, a device error) is
  // reported failed with the reason.
  Engine(std::vector<ModelEntry> models, Options options, MetricsRegistry* metrics);
  ~Engine();  // requests still queued are answered UNAVAILABLE; running executions finish first
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Always takes ownership of `request`; `on_done` fires exactly once, on this thread for errors found at
  // once (unknown model, invalid input, a full queue or byte budget, a deadline already passed, a superseded
  // frame) or later on a scheduler thread or the device's completion thread. Checks the request against the model's
  // config: input names, datatypes, shapes and byte sizes, requested outputs. Then the model's scheduler applies
  // priority, deadline, batching, latest frame wins and cancellation (see scheduler/scheduler.h).
  void Submit(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done);

  // NotFound for an unknown model or version; Unavailable (with the reason) for one that failed to load.
  // version 0 = the highest ready version.
  Result<std::shared_ptr<const LoadedVersion>> FindVersion(const std::string& model, int64_t version) const;
  // The model's config even when it is not ready (for metadata); NotFound if unknown or unparsable.
  Result<ModelConfig> FindConfig(const std::string& model) const;
  // The ready versions of a model, ascending.
  std::vector<int64_t> ReadyVersions(const std::string& model) const;

  bool Ready() const;  // every model in the repository is ready
  std::vector<ModelState> States() const;

  // The multiplexer on Options::device (streams, busy time), or null without a device.
  Multiplexer* multiplexer() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft
