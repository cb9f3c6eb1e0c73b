#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "metrics/metrics.h"

namespace weft {

// The live repository's series of one model (label model). Resolved once per model; docs/metrics.md lists them.
struct ModelLifecycleMetrics {
  ModelLifecycleMetrics(MetricsRegistry* registry, const std::string& model);

  Counter* loads;            // versions loaded and warmed
  Counter* unloads;          // versions torn down after their last request
  Counter* swaps;            // changes of the serving set
  Counter* config_failures;  // configs that did not load (what served kept serving)
  Histogram* load_seconds;   // checksums and instances, per version
  Histogram* warmup_seconds;
  // weft_model_load_failures_total{stage}: "checksums", "instances", "warmup", "start", "refused".
  Counter* FailureCounter(const std::string& stage);

 private:
  MetricsRegistry* const registry_;
  const std::string model_;
  std::map<std::string, Counter*> failures_;
};

// Every model's series, made on first use. Used by the live repository's controller thread alone.
class LifecycleMetrics {
 public:
  explicit LifecycleMetrics(MetricsRegistry* registry) : registry_(registry) {}
  ModelLifecycleMetrics& For(const std::string& model);
  // weft_model_version_state{model, version, state}: 1 for the version's state, 0 for the others.
  Gauge* StateGauge(const std::string& model, int64_t version, VersionState state);
  // Drops the four state series of a version that is gone.
  void RemoveStateSeries(const std::string& model, int64_t version);

 private:
  MetricsRegistry* const registry_;
  std::map<std::string, std::unique_ptr<ModelLifecycleMetrics>> models_;
};

}  // namespace weft
