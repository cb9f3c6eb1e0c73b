#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "model/request.h"
#include "repository/repository.h"

namespace weft {

// Per-version metric handles, resolved once so that the request path takes no registry lock.
struct VersionMetrics {
  VersionMetrics(MetricsRegistry* registry, const std::string& model, int64_t version);
  Counter* success;
  Counter* inference_count;
  Counter* execution_count;
  Histogram* request_duration;
  Histogram* queue_duration;
  Histogram* compute_duration;
  // Failures by reason; see FailureReason().
  Counter* FailureCounter(StatusCode code);

 private:
  MetricsRegistry* registry_;
  std::string model_;
  std::string version_;
  std::mutex mu_;
  std::vector<std::pair<StatusCode, Counter*>> failures_;  // guarded by mu_
};

// The label value for a failure's reason in weft_inference_request_failure_total.
std::string_view FailureReason(StatusCode code);

// Runs one model version: a FIFO queue served by one thread per instance, so that an instance never runs two
// requests at once and requests start in arrival order. Thread-safe. Every enqueued request is answered
// exactly once: by an instance, or with UNAVAILABLE when the runner stops first.
class ModelRunner {
 public:
  struct Options {
    size_t max_queue = 0;  // 0 = unbounded
  };
  struct Work {
    std::unique_ptr<InferenceRequest> request;
    std::vector<Tensor> inputs;  // validated, in config order, framework shapes
    InferenceCallback on_done;
  };

  ModelRunner(std::shared_ptr<LoadedVersion> version, Options options, std::shared_ptr<VersionMetrics> metrics);
  ~ModelRunner();  // stops the threads; answers what is still queued

  // Takes the work, or answers it at once with RESOURCE_EXHAUSTED when the queue is full.
  void Enqueue(Work work);

  const std::shared_ptr<LoadedVersion>& version() const { return version_; }
  VersionMetrics& metrics() { return *metrics_; }

 private:
  void Serve(std::stop_token stop, ModelInstance* instance);
  void Run(ModelInstance* instance, Work work);

  // Constant after construction.
  const std::shared_ptr<LoadedVersion> version_;
  const Options options_;
  const std::shared_ptr<VersionMetrics> metrics_;

  std::mutex mu_;
  std::condition_variable_any ready_;
  std::deque<Work> queue_;  // guarded by mu_
  std::vector<std::jthread> threads_;
};

// Finishes a request: records metrics and calls its callback.
void Complete(VersionMetrics& metrics, const InferenceRequest& request, InferenceCallback& on_done,
              Result<InferenceResponse> result);

}  // namespace weft
