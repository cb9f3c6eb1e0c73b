#include "scheduler/version_metrics.h"

#include <chrono>

#include "model/model_config.h"

namespace weft {

std::string_view FailureReason(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kResourceExhausted: return "rejected";
    case StatusCode::kDeadlineExceeded: return "timeout";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kAborted: return "superseded";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kOutOfMemory: return "out_of_memory";
    default: return "backend";
  }
}

VersionMetrics::VersionMetrics(MetricsRegistry* registry, const std::string& model, int64_t version, uint32_t levels) {
  const std::string v = std::to_string(version);
  const Labels labels = {{"model", model}, {"version", v}};
  success = registry->GetCounter("weft_inference_request_success_total", "Requests answered with outputs.", labels);
  inference_count =
      registry->GetCounter("weft_inference_count_total", "Inferences performed (a batch of n counts n).", labels);
  execution_count =
      registry->GetCounter("weft_inference_exec_count_total", "Executions of the model (one per batch).", labels);
  request_duration = registry->GetHistogram("weft_inference_request_duration_seconds",
                                            "Time from arrival to answer, successes and failures.", labels);
  queue_duration = registry->GetHistogram("weft_inference_queue_duration_seconds",
                                          "Time a request waited in the queue before its execution started.", labels);
  compute_duration = registry->GetHistogram("weft_inference_compute_duration_seconds",
                                            "Time an execution took in the backend.", labels);
  batch_size = registry->GetHistogram("weft_batch_size", "Batch items per execution.", labels,
                                      {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024});
  oom_retries = registry->GetCounter("weft_oom_retries_total",
                                     "Batches that ran out of memory, split in two and retried.", labels);
  oom_batch_cap = registry->GetGauge(
      "weft_oom_batch_cap", "The lowest cap on batch items over the instances after running out of memory; 0 = none.",
      labels);
  execution_timeouts = registry->GetCounter(
      "weft_execution_timeouts_total",
      "Executions that overran weft.execution_timeout_ms; their requests were answered with an error at the limit.",
      labels);
  instances_replaced = registry->GetCounter(
      "weft_instances_replaced_total",
      "Fresh instances started in place of ones quarantined after an execution overran its limit.", labels);
  for (uint32_t level = 1; level <= levels; ++level) {
    queue_depth.push_back(registry->GetGauge("weft_queue_depth", "Requests waiting in the queue, by priority level.",
                                             {{"model", model}, {"version", v}, {"level", std::to_string(level)}}));
  }
  for (size_t c = 0; c < failures_.size(); ++c) {
    failures_[c] = registry->GetCounter(
        "weft_inference_request_failure_total", "Requests answered with an error, by reason.",
        {{"model", model}, {"version", v}, {"reason", std::string(FailureReason(static_cast<StatusCode>(c)))}});
  }
}

void VersionMetrics::Remove(MetricsRegistry* registry, const std::string& model, int64_t version) {
  const std::string v = std::to_string(version);
  const Labels labels = {{"model", model}, {"version", v}};
  for (const char* name :
       {"weft_inference_request_success_total", "weft_inference_count_total", "weft_inference_exec_count_total",
        "weft_inference_request_duration_seconds", "weft_inference_queue_duration_seconds",
        "weft_inference_compute_duration_seconds", "weft_batch_size", "weft_oom_retries_total", "weft_oom_batch_cap",
        "weft_execution_timeouts_total", "weft_instances_replaced_total"}) {
    registry->Remove(name, labels);
  }
  // Every level a config may have: another copy of the version may have had more levels than the last one.
  for (uint32_t level = 1; level <= ConfigLimits::kMaxPriorityLevels; ++level) {
    registry->Remove("weft_queue_depth", {{"model", model}, {"version", v}, {"level", std::to_string(level)}});
  }
  for (size_t c = 0; c < kStatusCodeCount; ++c) {
    registry->Remove(
        "weft_inference_request_failure_total",
        {{"model", model}, {"version", v}, {"reason", std::string(FailureReason(static_cast<StatusCode>(c)))}});
  }
}

void Complete(VersionMetrics& metrics, const InferenceRequest& request, InferenceCallback& on_done,
              Result<InferenceResponse> result) {
  if (result.ok()) {
    metrics.success->Increment();
  } else {
    metrics.FailureCounter(result.status().code())->Increment();
  }
  metrics.request_duration->Observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - request.arrival).count());
  on_done(std::move(result));
}

}  // namespace weft
