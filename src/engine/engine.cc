#include "engine/engine.h"

#include <map>

#include "base/log.h"
#include "engine/model_runner.h"
#include "engine/request_validation.h"

namespace weft {

struct Engine::Impl {
  struct ModelSlot {
    ModelEntry entry;
    std::map<int64_t, std::unique_ptr<ModelRunner>> runners;  // by version, ready ones only
  };

  Options options;
  // Built in the constructor, read-only afterwards: lookups need no lock.
  std::map<std::string, ModelSlot> models;

  // Finds the runner for (model, version); version 0 = the highest ready one.
  Result<ModelRunner*> FindRunner(const std::string& model, int64_t version) const {
    auto it = models.find(model);
    if (it == models.end()) return NotFound("unknown model '" + model + "'");
    const ModelSlot& slot = it->second;
    if (version == 0) {
      if (slot.runners.empty()) {
        return Unavailable("model '" + model + "' is not ready: " + slot.entry.status.message());
      }
      return slot.runners.rbegin()->second.get();
    }
    auto v = slot.runners.find(version);
    if (v != slot.runners.end()) return v->second.get();
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
  for (auto& entry : models) {
    std::string name = entry.name;
    Impl::ModelSlot slot;
    for (auto& version : entry.versions) {
      auto version_metrics = std::make_shared<VersionMetrics>(metrics, name, version->version);
      slot.runners[version->version] = std::make_unique<ModelRunner>(
          version, ModelRunner::Options{.max_queue = options.max_queue_per_model}, std::move(version_metrics));
    }
    slot.entry = std::move(entry);
    impl_->models.emplace(std::move(name), std::move(slot));
  }
}

Engine::~Engine() = default;

void Engine::Submit(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done) {
  auto runner = impl_->FindRunner(request->model_name, request->model_version);
  if (!runner.ok()) {
    on_done(runner.status());
    return;
  }
  ModelRunner* r = *runner;
  auto inputs = PrepareInputs(r->version()->config, *request);
  if (!inputs.ok()) {
    Complete(r->metrics(), *request, on_done, inputs.status());
    return;
  }
  r->Enqueue({.request = std::move(request), .inputs = std::move(inputs).value(), .on_done = std::move(on_done)});
}

Result<std::shared_ptr<const LoadedVersion>> Engine::FindVersion(const std::string& model, int64_t version) const {
  WEFT_ASSIGN_OR_RETURN(ModelRunner * runner, impl_->FindRunner(model, version));
  return std::shared_ptr<const LoadedVersion>(runner->version());
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
  for (const auto& [v, r] : it->second.runners) out.push_back(v);
  return out;
}

bool Engine::Ready() const {
  for (const auto& [name, slot] : impl_->models) {
    if (slot.runners.empty()) return false;
  }
  return true;
}

std::vector<ModelState> Engine::States() const {
  std::vector<ModelState> out;
  for (const auto& [name, slot] : impl_->models) {
    if (slot.runners.empty()) {
      out.push_back({name, 0, false, slot.entry.status.message()});
    }
    for (const auto& [v, r] : slot.runners) out.push_back({name, v, true, ""});
    for (const auto& [v, status] : slot.entry.failed_versions) out.push_back({name, v, false, status.message()});
  }
  return out;
}

}  // namespace weft
