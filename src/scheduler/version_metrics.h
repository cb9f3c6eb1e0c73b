#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "metrics/metrics.h"
#include "model/request.h"
#include "model/statistics.h"

namespace weft {

// The metrics of one model version (labels model, version), resolved once at construction so that the request
// path takes no registry lock. Thread-safe: the handles are lock-free.
struct VersionMetrics {
  VersionMetrics(MetricsRegistry* registry, const std::string& model, int64_t version, uint32_t levels = 1);

  Counter* success;
  Counter* inference_count;  // batch items executed (a batch of n counts n)
  Counter* execution_count;  // executions (one per batch)
  Histogram* request_duration;
  Histogram* queue_duration;
  Histogram* compute_duration;
  Histogram* batch_size;            // items per execution
  std::vector<Gauge*> queue_depth;  // queued requests; index = priority level - 1
  Counter* oom_retries;             // batches split in two and retried after running out of memory
  Gauge* oom_batch_cap;             // the lowest batch cap over the version's instances after one; 0 = none
  Gauge* tuned_batch_cap;           // the batch tuner's chosen cap (scheduler/batch_tuner.h); 0 = tuning off
  Counter* execution_timeouts;      // executions answered at weft.execution_timeout_ms instead of by their outputs
  Counter* instances_replaced;      // fresh instances started in place of ones quarantined after a timeout
  Counter* caller_runs;             // executions run by the thread that submitted a lone request (caller_run.h)
  Gauge* last_answer;               // when the last request was answered, seconds since the Unix epoch

  // Triton's per-model families (nv_*), with its names, labels and semantics, for its dashboards, and the source of
  // the statistics extension. As in Triton, the durations are cumulative microseconds of successful requests only,
  // each request counted once with its batch's compute times, so every stage has the success count as its count.
  struct Triton {
    Counter* success;            // nv_inference_request_success
    Counter* inference_count;    // nv_inference_count
    Counter* execution_count;    // nv_inference_exec_count
    Counter* request_us;         // nv_inference_request_duration_us: arrival to answer
    Counter* queue_us;           // nv_inference_queue_duration_us
    Counter* compute_input_us;   // nv_inference_compute_input_duration_us: gathering the batch's inputs
    Counter* compute_infer_us;   // nv_inference_compute_infer_duration_us: the execution
    Counter* compute_output_us;  // nv_inference_compute_output_duration_us: cutting and finishing the outputs
    Gauge* pending;              // nv_inference_pending_request_count: queued, not yet executing
    // nv_inference_{request,queue,compute_input,compute_infer,compute_output}_summary_us: the same durations'
    // quantiles, when the registry makes latency summaries; null otherwise.
    Summary* request_summary = nullptr;
    Summary* queue_summary = nullptr;
    Summary* compute_input_summary = nullptr;
    Summary* compute_infer_summary = nullptr;
    Summary* compute_output_summary = nullptr;
    std::array<Counter*, kStatusCodeCount> failures{};  // nv_inference_request_failure by Triton's reason
  };
  Triton triton;

  // Takes every series of (model, version) out of the exposition, once no scheduler of that version is left (the
  // caller makes sure: the pointers of such a scheduler would dangle).
  static void Remove(MetricsRegistry* registry, const std::string& model, int64_t version);

  // weft_inference_request_failure_total for `code`'s reason (see FailureReason).
  Counter* FailureCounter(StatusCode code) const { return failures_[static_cast<size_t>(code)]; }

 private:
  std::array<Counter*, kStatusCodeCount> failures_{};
};

// The label value for a failure's reason in weft_inference_request_failure_total: "rejected" (a full queue or
// byte budget), "timeout", "cancelled", "superseded" (latest frame wins), "unavailable" (shutdown),
// "invalid_argument", "backend" (everything else).
std::string_view FailureReason(StatusCode code);

// Triton's reason label of nv_inference_request_failure: "REJECTED" (a full queue, a timeout in the queue),
// "CANCELED", "BACKEND" (the execution failed) or "OTHER".
std::string_view TritonFailureReason(StatusCode code);

// What Triton's statistics extension reports for one model version, read from its series.
VersionStatistics ReadVersionStatistics(MetricsRegistry* registry, const std::string& model, int64_t version);

// The times of one request answered with outputs, added to its version's Triton series before it is answered.
struct SuccessTimes {
  std::chrono::nanoseconds queue{0};
  std::chrono::nanoseconds compute_input{0};
  std::chrono::nanoseconds compute_infer{0};
  std::chrono::nanoseconds compute_output{0};
};
void RecordSuccessTimes(VersionMetrics& metrics, const SuccessTimes& times);

// Answers a request: records its outcome and its duration since arrival, then calls `on_done`. Call it
// outside every lock: `on_done` is the caller's code.
void Complete(VersionMetrics& metrics, const InferenceRequest& request, InferenceCallback& on_done,
              Result<InferenceResponse> result);

}  // namespace weft
