#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "device/device.h"
#include "metrics/metrics.h"
#include "model/model_config.h"
#include "model/request.h"
#include "multiplexer/multiplexer.h"
#include "repository/repository.h"
#include "rollout/stage_recorder.h"
#include "scheduler/version_metrics.h"

namespace weft {

// The state of one model (or one version) as the protocol reports it.
struct ModelState {
  std::string name;
  int64_t version = 0;  // 0 for a model-level entry
  bool ready = false;
  std::string reason;  // why it is not ready
};

// A version's state as the repository index reports it (Triton's names).
enum class VersionState { kLoading, kReady, kUnloading, kUnavailable };
std::string_view VersionStateName(VersionState state);  // "LOADING", "READY", "UNLOADING", "UNAVAILABLE"

struct VersionReport {
  int64_t version = 0;
  VersionState state = VersionState::kUnavailable;
  std::string reason;  // why it is in that state; for a ready version, what else is going on (a reload)
};

// A version in service: its loaded instances, the device lanes of those instances and its scheduler. The engine
// creates it (Engine::StartVersion) and owns it; a VersionHandle keeps it in service. The routing table, every
// request admitted to it and the lifecycle hold handles; when the last one is gone (nothing routes to it and every
// request it took is answered), the engine tears it down on its own thread. Immutable once started.
struct ServingVersion {
  std::shared_ptr<LoadedVersion> loaded;  // its config, instances and directory
  struct Parts;                           // the scheduler and the lanes (engine.cc)
  std::unique_ptr<Parts> parts;

  ServingVersion();
  ~ServingVersion();
  int64_t version() const { return loaded->version; }
  const ModelConfig& config() const { return loaded->config; }
};
using VersionHandle = std::shared_ptr<const ServingVersion>;

// A rollout's hold on a model's traffic, for one stage (lifecycle/ decides each stage). Requests that name no version
// go to the primary; in a canary stage a share of them goes to the candidate instead; in a shadow stage a share of
// the primary's requests is copied to the candidate at the lowest priority, answered, compared with the primary's
// answer and dropped. Both versions must be in the route's `serving`; while one is not, everything goes to the
// primary (or, without it, to the default version). Immutable once published.
struct RolloutRoute {
  int64_t primary = 0;
  int64_t candidate = 0;
  double canary_share = 0;
  double shadow_share = 0;
  std::string sticky_key;                   // a request parameter: the same value, the same arm; empty = drawn
  std::shared_ptr<StageRecorder> recorder;  // the stage's figures: every routed answer and comparison lands here
  // Per arm (primary, candidate): answers, and the server's faults among them; shadow copies sent and dropped.
  std::array<Counter*, 2> answers{};
  std::array<Counter*, 2> errors{};
  Counter* shadow_sent = nullptr;
  Counter* shadow_dropped = nullptr;
};

// What the engine serves of one model and what it reports about it. Published as a whole; immutable once published.
struct ModelRoute {
  std::shared_ptr<const ModelConfig> config;  // for metadata and config queries; null when none is valid
  std::map<int64_t, VersionHandle> serving;   // the versions that answer requests
  // The version that answers requests naming none (version 0) when it serves; 0 = the highest serving one.
  int64_t default_version = 0;
  std::shared_ptr<const RolloutRoute> rollout;      // a rollout under way, or null
  std::vector<VersionReport> versions;              // every version worth reporting, ascending (the serving ones too)
  Status unavailable;                               // while `serving` is empty: why (loading, unloaded, failed)
  VersionState state = VersionState::kUnavailable;  // the model as a whole: kReady while anything serves
  bool failed = false;                              // it should serve and cannot: the server is not ready (strict)
};

// Every model the engine knows, by name. Immutable: a change publishes a new table.
struct RoutingTable {
  std::map<std::string, std::shared_ptr<const ModelRoute>, std::less<>> models;
};

// The facade that frontends call: it serves the models it is given and runs requests on their instances. The data
// plane of the live repository: lifecycle/ decides which versions serve and publishes them here (PublishModel);
// requests take the routing table's current snapshot once (a pointer copied under a mutex held for nothing else).
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
    // Triton's --strict-readiness: Ready() is false while any model that should serve cannot. Off: Ready() is
    // always true (the process answers).
    bool strict_readiness = true;
  };

  // An engine that serves nothing until models are published.
  Engine(Options options, MetricsRegistry* metrics);
  // An engine that serves `models` as they are, for good: starts a scheduler (one thread per instance and a timer)
  // for every loaded version. A version whose instances cannot get a lane (a bad weft.max_inflight_batches, a
  // device error) is reported failed with the reason.
  Engine(std::vector<ModelEntry> models, Options options, MetricsRegistry* metrics);
  // Requests still queued are answered UNAVAILABLE; running executions finish first. Every VersionHandle other than
  // those held by requests must be released before.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Always takes ownership of `request`; `on_done` fires exactly once, on this thread for errors found at
  // once (unknown model, invalid input, a full queue or byte budget, a deadline already passed, a superseded
  // frame) or later on a scheduler thread or the device's completion thread. Checks the request against the model's
  // config: input names, datatypes, shapes and byte sizes, requested outputs. Then the model's scheduler applies
  // priority, deadline, batching, latest frame wins and cancellation (see scheduler/scheduler.h). The request
  // holds the version it was routed to until it is answered, so a version taken out of service finishes it.
  void Submit(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done);

  // NotFound for an unknown model or version; Unavailable (with the reason) for one that does not serve.
  // version 0 = the default version (the route's default_version when it serves, else the highest).
  Result<std::shared_ptr<const LoadedVersion>> FindVersion(const std::string& model, int64_t version) const;
  // The model's config even when it is not ready (for metadata); NotFound if unknown, Unavailable if unparsable.
  Result<ModelConfig> FindConfig(const std::string& model) const;
  // The serving versions of a model, ascending.
  std::vector<int64_t> ReadyVersions(const std::string& model) const;

  bool Ready() const;  // strict readiness: no model has failed; without it, always
  std::vector<ModelState> States() const;
  // Triton's statistics extension: the figures of `version` of `model` (0: each of its serving versions; an empty
  // model: every serving version of every model). The errors of FindVersion for a named model or version; an empty
  // model with a version is InvalidArgument.
  Result<std::vector<VersionStatistics>> Statistics(const std::string& model, int64_t version) const;
  // The routing table now: every model, its serving versions and its reports.
  std::shared_ptr<const RoutingTable> Table() const;

  // Puts a loaded version into service: a lane per instance on the device and a scheduler. It serves once it is
  // in a published route. `on_unloaded` (optional) runs on the engine's unload thread after the version is torn
  // down (never during the engine's destruction). Unavailable when its threads cannot start; the device's errors.
  Result<VersionHandle> StartVersion(std::shared_ptr<LoadedVersion> loaded, std::function<void()> on_unloaded = {});
  // Replaces the model's route (or adds it) in one atomic step: requests that read the table from now on see only
  // the new route; requests already admitted to a version it drops finish there.
  void PublishModel(const std::string& name, std::shared_ptr<const ModelRoute> route);
  void RemoveModel(const std::string& name);

  // The multiplexer on Options::device (streams, busy time), or null without a device.
  Multiplexer* multiplexer() const;

 private:
  // StartVersion once the version is counted among the copies of its (model, version).
  Result<VersionHandle> StartCopy(std::shared_ptr<LoadedVersion> loaded, std::function<void()> on_unloaded);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace weft
