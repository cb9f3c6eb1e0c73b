#include "lifecycle/lifecycle_metrics.h"

namespace weft {
namespace {

// From a built-in model's milliseconds to a large model's minutes.
std::vector<double> LoadBuckets() {
  return {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

constexpr char kStateName[] = "weft_model_version_state";
constexpr char kStateHelp[] =
    "1 for the state each model version is in (READY, LOADING, UNLOADING, UNAVAILABLE), 0 for the others.";

}  // namespace

ModelLifecycleMetrics::ModelLifecycleMetrics(MetricsRegistry* registry, const std::string& model)
    : loads(registry->GetCounter("weft_model_loads_total", "Model versions loaded and warmed up.", {{"model", model}})),
      unloads(registry->GetCounter("weft_model_unloads_total",
                                   "Model versions unloaded after answering their last request.", {{"model", model}})),
      swaps(registry->GetCounter("weft_model_swaps_total", "Changes of the set of versions that serve a model.",
                                 {{"model", model}})),
      config_failures(registry->GetCounter(
          "weft_model_config_failures_total",
          "Configurations of a model that did not load (the versions that served kept serving).", {{"model", model}})),
      load_seconds(registry->GetHistogram("weft_model_load_duration_seconds",
                                          "Time to verify a version's checksums and create its instances.",
                                          {{"model", model}}, LoadBuckets())),
      warmup_seconds(registry->GetHistogram("weft_model_warmup_duration_seconds",
                                            "Time to run a version's warm-up samples on every instance.",
                                            {{"model", model}}, LoadBuckets())),
      registry_(registry),
      model_(model) {}

Counter* ModelLifecycleMetrics::FailureCounter(const std::string& stage) {
  Counter*& counter = failures_[stage];
  if (!counter) {
    counter = registry_->GetCounter("weft_model_load_failures_total",
                                    "Model versions that did not load, by the stage that failed.",
                                    {{"model", model_}, {"stage", stage}});
  }
  return counter;
}

ModelLifecycleMetrics& LifecycleMetrics::For(const std::string& model) {
  auto& slot = models_[model];
  if (!slot) slot = std::make_unique<ModelLifecycleMetrics>(registry_, model);
  return *slot;
}

Gauge* LifecycleMetrics::StateGauge(const std::string& model, int64_t version, VersionState state) {
  return registry_->GetGauge(
      kStateName, kStateHelp,
      {{"model", model}, {"version", std::to_string(version)}, {"state", std::string(VersionStateName(state))}});
}

void LifecycleMetrics::RemoveStateSeries(const std::string& model, int64_t version) {
  for (VersionState state :
       {VersionState::kLoading, VersionState::kReady, VersionState::kUnloading, VersionState::kUnavailable}) {
    registry_->Remove(
        kStateName,
        {{"model", model}, {"version", std::to_string(version)}, {"state", std::string(VersionStateName(state))}});
  }
}

}  // namespace weft
