#include "scheduler/version_metrics.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>

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

std::string_view TritonFailureReason(StatusCode code) {
  switch (code) {
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded: return "REJECTED";
    case StatusCode::kCancelled:
    case StatusCode::kAborted: return "CANCELED";
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kUnavailable:
    case StatusCode::kUnimplemented: return "OTHER";
    default: return "BACKEND";
  }
}

namespace {

// Triton's family names, in the order of VersionMetrics::Triton's counters.
constexpr const char* kTritonCounters[] = {"nv_inference_request_success",
                                           "nv_inference_count",
                                           "nv_inference_exec_count",
                                           "nv_inference_request_duration_us",
                                           "nv_inference_queue_duration_us",
                                           "nv_inference_compute_input_duration_us",
                                           "nv_inference_compute_infer_duration_us",
                                           "nv_inference_compute_output_duration_us"};
constexpr const char* kTritonHelp[] = {"Number of successful inference requests, all batch sizes",
                                       "Number of inferences performed (a batch of n counts n)",
                                       "Number of model executions performed (one per batch)",
                                       "Cumulative inference request duration in microseconds (successful requests)",
                                       "Cumulative inference queuing duration in microseconds (successful requests)",
                                       "Cumulative compute input duration in microseconds (successful requests)",
                                       "Cumulative compute inference duration in microseconds (successful requests)",
                                       "Cumulative compute output duration in microseconds (successful requests)"};
// Triton's latency summaries (--metrics-config summary_latencies=true), in the order of VersionMetrics::Triton's.
constexpr const char* kTritonSummaries[] = {
    "nv_inference_request_summary_us", "nv_inference_queue_summary_us", "nv_inference_compute_input_summary_us",
    "nv_inference_compute_infer_summary_us", "nv_inference_compute_output_summary_us"};
constexpr const char* kTritonSummaryHelp[] = {
    "Summary of inference request duration in microseconds (successful requests)",
    "Summary of inference queuing duration in microseconds (successful requests)",
    "Summary of compute input duration in microseconds (successful requests)",
    "Summary of compute inference duration in microseconds (successful requests)",
    "Summary of compute output duration in microseconds (successful requests)"};
constexpr const char* kTritonPending = "nv_inference_pending_request_count";
constexpr const char* kTritonFailure = "nv_inference_request_failure";

uint64_t Whole(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(v + 0.5); }

double MicrosDouble(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

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
  tuned_batch_cap = registry->GetGauge(
      "weft_batch_tuned_cap",
      "The most items per batch that the batch tuner chose from measured costs (weft.batch_tuning); 0 = tuning off.",
      labels);
  execution_timeouts = registry->GetCounter(
      "weft_execution_timeouts_total",
      "Executions that overran weft.execution_timeout_ms; their requests were answered with an error at the limit.",
      labels);
  instances_replaced = registry->GetCounter(
      "weft_instances_replaced_total",
      "Fresh instances started in place of ones quarantined after an execution overran its limit.", labels);
  caller_runs = registry->GetCounter(
      "weft_caller_runs_total",
      "Executions run by the thread that received a lone request (an HTTP or gRPC thread) instead of the instance's "
      "thread (weft.run_on_caller).",
      labels);
  last_answer =
      registry->GetGauge("weft_last_inference_timestamp_seconds",
                         "When the version last answered a request, in seconds since the Unix epoch.", labels);
  Counter** triton_counters[] = {&triton.success,          &triton.inference_count,  &triton.execution_count,
                                 &triton.request_us,       &triton.queue_us,         &triton.compute_input_us,
                                 &triton.compute_infer_us, &triton.compute_output_us};
  for (size_t i = 0; i < std::size(kTritonCounters); ++i) {
    *triton_counters[i] = registry->GetCounter(kTritonCounters[i], kTritonHelp[i], labels);
  }
  if (std::optional<Summary::Options> summary = registry->latency_summaries()) {
    Summary** triton_summaries[] = {&triton.request_summary, &triton.queue_summary, &triton.compute_input_summary,
                                    &triton.compute_infer_summary, &triton.compute_output_summary};
    for (size_t i = 0; i < std::size(kTritonSummaries); ++i) {
      *triton_summaries[i] = registry->GetSummary(kTritonSummaries[i], kTritonSummaryHelp[i], labels, *summary);
    }
  }
  triton.pending = registry->GetGauge(kTritonPending,
                                      "Instantaneous number of pending requests awaiting execution per-model.", labels);
  for (size_t c = 0; c < triton.failures.size(); ++c) {
    triton.failures[c] = registry->GetCounter(
        kTritonFailure, "Number of failed inference requests, all batch sizes",
        {{"model", model}, {"version", v}, {"reason", std::string(TritonFailureReason(static_cast<StatusCode>(c)))}});
  }
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
        "weft_batch_tuned_cap", "weft_execution_timeouts_total", "weft_instances_replaced_total",
        "weft_caller_runs_total", "weft_last_inference_timestamp_seconds"}) {
    registry->Remove(name, labels);
  }
  for (const char* name : kTritonCounters) registry->Remove(name, labels);
  for (const char* name : kTritonSummaries) registry->Remove(name, labels);
  registry->Remove(kTritonPending, labels);
  for (size_t c = 0; c < kStatusCodeCount; ++c) {
    registry->Remove(
        kTritonFailure,
        {{"model", model}, {"version", v}, {"reason", std::string(TritonFailureReason(static_cast<StatusCode>(c)))}});
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

void RecordSuccessTimes(VersionMetrics& metrics, const SuccessTimes& times) {
  metrics.triton.queue_us->Increment(MicrosDouble(times.queue));
  metrics.triton.compute_input_us->Increment(MicrosDouble(times.compute_input));
  metrics.triton.compute_infer_us->Increment(MicrosDouble(times.compute_infer));
  metrics.triton.compute_output_us->Increment(MicrosDouble(times.compute_output));
  if (metrics.triton.queue_summary == nullptr) return;
  metrics.triton.queue_summary->Observe(MicrosDouble(times.queue));
  metrics.triton.compute_input_summary->Observe(MicrosDouble(times.compute_input));
  metrics.triton.compute_infer_summary->Observe(MicrosDouble(times.compute_infer));
  metrics.triton.compute_output_summary->Observe(MicrosDouble(times.compute_output));
}

VersionStatistics ReadVersionStatistics(MetricsRegistry* registry, const std::string& model, int64_t version) {
  // The registry returns the series the version's schedulers count in.
  const VersionMetrics m(registry, model, version);
  VersionStatistics out;
  out.model = model;
  out.version = version;
  out.inference_count = Whole(m.triton.inference_count->value());
  out.execution_count = Whole(m.triton.execution_count->value());
  const uint64_t successes = Whole(m.triton.success->value());
  auto stage = [successes](const Counter* us) { return StatisticDuration{successes, Whole(us->value() * 1000.0)}; };
  out.success = stage(m.triton.request_us);
  out.queue = stage(m.triton.queue_us);
  out.compute_input = stage(m.triton.compute_input_us);
  out.compute_infer = stage(m.triton.compute_infer_us);
  out.compute_output = stage(m.triton.compute_output_us);
  double failures = 0;
  // Each Triton reason's counter is shared by several codes: count each series once.
  std::vector<const Counter*> seen;
  for (const Counter* c : m.triton.failures) {
    if (std::find(seen.begin(), seen.end(), c) != seen.end()) continue;
    seen.push_back(c);
    failures += c->value();
  }
  // Every answer's duration is in the histogram, the successes' also in Triton's counter: the rest is the failures'.
  const double all_ns = m.request_duration->sum() * 1e9;
  out.fail = {Whole(failures),
              all_ns > static_cast<double>(out.success.ns) ? Whole(all_ns - static_cast<double>(out.success.ns)) : 0};
  out.last_inference_ms = Whole(m.last_answer->value() * 1000.0);
  return out;
}

void Complete(VersionMetrics& metrics, const InferenceRequest& request, InferenceCallback& on_done,
              Result<InferenceResponse> result) {
  const auto elapsed = std::chrono::steady_clock::now() - request.arrival;
  if (result.ok()) {
    metrics.success->Increment();
    metrics.triton.request_us->Increment(MicrosDouble(elapsed));
    if (metrics.triton.request_summary != nullptr) metrics.triton.request_summary->Observe(MicrosDouble(elapsed));
    metrics.triton.success->Increment();
  } else {
    metrics.FailureCounter(result.status().code())->Increment();
    metrics.triton.failures[static_cast<size_t>(result.status().code())]->Increment();
  }
  metrics.request_duration->Observe(std::chrono::duration<double>(elapsed).count());
  metrics.last_answer->Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  on_done(std::move(result));
}

}  // namespace weft
