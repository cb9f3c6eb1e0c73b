#include "engine/engine.h"

#include <map>

#include "base/log.h"
#include "engine/request_validation.h"
#include "scheduler/scheduler.h"

namespace weft {
namespace {

// An instance's multiplexer lane, as the scheduler's executor. The multiplexer knows no scheduler and the scheduler
// no multiplexer; the engine joins them here.
class LaneExecutor final : public InstanceExecutor {
 public:
  explicit LaneExecutor(std::unique_ptr<Lane> lane) : lane_(std::move(lane)) {}
  bool TryAcquireSlot() override { return lane_->TryAcquireSlot(); }
  bool AcquireSlot(std::stop_token stop) override { return lane_->AcquireSlot(stop); }
  void ReleaseSlot() override { lane_->ReleaseSlot(); }
  void Submit(std::vector<Tensor> inputs, ExecutionDone done) override {
    // The caller is the scheduler's instance thread. Its next batch could not start before this one ends (an
    // instance runs one batch at a time), so it may as well run this one itself when the device would start it
    // at once: one thread hand-off fewer per request.
    lane_->Submit(
        std::move(inputs),
        [done = std::move(done)](Result<std::vector<Tensor>> outputs, const BatchTiming& timing) {
          done(std::move(outputs), ExecutionTiming{timing.start, timing.end});
        },
        /*may_run_here=*/true);
  }

 private:
  const std::unique_ptr<Lane> lane_;  // its destructor waits for the lane's batches in flight
};

}  // namespace

struct Engine::Impl {
  struct VersionSlot {
    std::shared_ptr<LoadedVersion> version;  // owns the instances; outlives the scheduler (declared first)
    std::vector<std::unique_ptr<LaneExecutor>> executors;  // used by the scheduler, so destroyed after it
    std::unique_ptr<Scheduler> scheduler;
  };
  struct ModelSlot {
    ModelEntry entry;
    std::map<int64_t, VersionSlot> versions;  // ready ones only
  };

  Options options;
  // Shared by every scheduler, so declared before (and destroyed after) them; null when unbounded.
  std::unique_ptr<ByteBudget> byte_budget;
  // Owns the streams every lane runs on: destroyed after the schedulers and their lanes. Null without a device.
  std::unique_ptr<Multiplexer> multiplexer;
  // Built in the constructor, read-only afterwards: lookups need no lock.
  std::map<std::string, ModelSlot> models;

  // Finds (model, version); version 0 = the highest ready one.
  Result<const VersionSlot*> Find(const std::string& model, int64_t version) const {
    auto it = models.find(model);
    if (it == models.end()) return NotFound("unknown model '" + model + "'");
    const ModelSlot& slot = it->second;
    if (version == 0) {
      if (slot.versions.empty()) {
        return Unavailable("model '" + model + "' is not ready: " + slot.entry.status.message());
      }
      return &slot.versions.rbegin()->second;
    }
    auto v = slot.versions.find(version);
    if (v != slot.versions.end()) return &v->second;
    for (const auto& [failed, status] : slot.entry.failed_versions) {
      if (failed == version) {
        return Unavailable("version " + std::to_string(version) + " of model '" + model +
                           "' is not ready: " + status.message());
      }
    }
    return NotFound("model '" + model + "' has no version " + std::to_string(version));
  }
};

Engine::Engine(std::vector<ModelEntry> models, Options options, MetricsRegistry* metrics)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (options.max_queued_bytes > 0) impl_->byte_budget = std::make_unique<ByteBudget>(options.max_queued_bytes);
  Status device_status;
  if (options.device) {
    auto multiplexer = Multiplexer::Create(options.device, options.multiplexer, metrics);
    if (multiplexer.ok()) {
      impl_->multiplexer = std::move(multiplexer).value();
    } else {
      device_status = multiplexer.status().WithContext("device " + options.device->name());
      WEFT_LOG(Error) << device_status.message();
    }
  }
  for (auto& entry : models) {
    std::string name = entry.name;
    Impl::ModelSlot slot;
    std::vector<std::shared_ptr<LoadedVersion>> ready;
    for (auto& version : entry.versions) {
      std::vector<ModelInstance*> instances;
      for (auto& instance : version->instances) instances.push_back(instance.get());
      std::vector<std::unique_ptr<LaneExecutor>> executors;
      Status lanes = device_status;
      if (impl_->multiplexer) {
        for (ModelInstance* instance : instances) {
          auto lane = impl_->multiplexer->AddInstance(version->config, version->version, instance);
          if (!lane.ok()) {
            lanes = lane.status();
            break;
          }
          executors.push_back(std::make_unique<LaneExecutor>(std::move(lane).value()));
        }
      }
      if (!lanes.ok()) {
        WEFT_LOG(Error) << "model '" << name << "' version " << version->version << ": " << lanes.message();
        entry.failed_versions.emplace_back(version->version, lanes);
        continue;
      }
      std::vector<InstanceExecutor*> raw_executors;
      for (auto& e : executors) raw_executors.push_back(e.get());
      Scheduler::Options scheduler_options{
          .version = version->version,
          .max_queue = options.max_queue_per_model != Options::kDefaultQueueBound ? options.max_queue_per_model
                       : ConfigBoundsQueue(version->config)                       ? 0
                                                                                  : DefaultQueueBound(version->config),
          .byte_budget = impl_->byte_budget.get(),
          .finish_outputs =
              [version](const InferenceRequest& request, std::vector<Tensor> outputs, int64_t batch_size) {
                return FinishOutputs(version->config, request, std::move(outputs), batch_size);
              },
          .executors = std::move(raw_executors),
      };
      Result<std::unique_ptr<Scheduler>> scheduler =
          Scheduler::Create(version->config, std::move(instances), std::move(scheduler_options), metrics);
      if (!scheduler.ok()) {
        WEFT_LOG(Error) << "model '" << name << "' version " << version->version << ": "
                        << scheduler.status().message();
        entry.failed_versions.emplace_back(version->version, scheduler.status());
        continue;
      }
      ready.push_back(version);
      slot.versions[version->version] = Impl::VersionSlot{version, std::move(executors), std::move(scheduler).value()};
    }
    if (ready.size() != entry.versions.size()) {
      entry.versions = std::move(ready);
      if (entry.versions.empty() && entry.status.ok()) entry.status = entry.failed_versions.back().second;
    }
    slot.entry = std::move(entry);
    impl_->models.emplace(std::move(name), std::move(slot));
  }
}

Engine::~Engine() = default;

void Engine::Submit(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done) {
  auto found = impl_->Find(request->model_name, request->model_version);
  if (!found.ok()) {
    on_done(found.status());
    return;
  }
  Scheduler& scheduler = *(*found)->scheduler;
  auto inputs = PrepareInputs(scheduler.config(), *request);
  if (!inputs.ok()) {
    Complete(scheduler.metrics(), *request, on_done, inputs.status());
    return;
  }
  scheduler.Submit({.request = std::move(request), .inputs = std::move(inputs).value(), .on_done = std::move(on_done)});
}

Result<std::shared_ptr<const LoadedVersion>> Engine::FindVersion(const std::string& model, int64_t version) const {
  WEFT_ASSIGN_OR_RETURN(const Impl::VersionSlot* slot, impl_->Find(model, version));
  return std::shared_ptr<const LoadedVersion>(slot->version);
}

Result<ModelConfig> Engine::FindConfig(const std::string& model) const {
  auto it = impl_->models.find(model);
  if (it == impl_->models.end()) return NotFound("unknown model '" + model + "'");
  if (!it->second.entry.config) {
    return Unavailable("model '" + model + "' has no valid configuration: " + it->second.entry.status.message());
  }
  return *it->second.entry.config;
}

std::vector<int64_t> Engine::ReadyVersions(const std::string& model) const {
  std::vector<int64_t> out;
  auto it = impl_->models.find(model);
  if (it == impl_->models.end()) return out;
  for (const auto& [v, slot] : it->second.versions) out.push_back(v);
  return out;
}

bool Engine::Ready() const {
  for (const auto& [name, slot] : impl_->models) {
    if (slot.versions.empty()) return false;
  }
  return true;
}

Multiplexer* Engine::multiplexer() const { return impl_->multiplexer.get(); }

std::vector<ModelState> Engine::States() const {
  std::vector<ModelState> out;
  for (const auto& [name, slot] : impl_->models) {
    if (slot.versions.empty()) {
      out.push_back({name, 0, false, slot.entry.status.message()});
    }
    for (const auto& [v, version] : slot.versions) out.push_back({name, v, true, ""});
    for (const auto& [v, status] : slot.entry.failed_versions) out.push_back({name, v, false, status.message()});
  }
  return out;
}

}  // namespace weft
