#include "engine/model_runner.h"

#include "base/log.h"
#include "engine/request_validation.h"

namespace weft {
namespace {
double SecondsSince(SteadyTime start, SteadyTime end) { return std::chrono::duration<double>(end - start).count(); }
}  // namespace

std::string_view FailureReason(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kResourceExhausted: return "rejected";
    case StatusCode::kDeadlineExceeded: return "timeout";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kAborted: return "superseded";
    case StatusCode::kUnavailable: return "unavailable";
    default: return "backend";
  }
}

VersionMetrics::VersionMetrics(MetricsRegistry* registry, const std::string& model, int64_t version)
    : registry_(registry), model_(model), version_(std::to_string(version)) {
  Labels labels = {{"model", model_}, {"version", version_}};
  success = registry->GetCounter("weft_inference_request_success_total", "Requests answered with outputs.", labels);
  inference_count = registry->GetCounter("weft_inference_count_total",
                                         "Inferences performed (a batch of n counts n).", labels);
  execution_count = registry->GetCounter("weft_inference_exec_count_total",
                                         "Executions of the model (one per batch).", labels);
  request_duration = registry->GetHistogram("weft_inference_request_duration_seconds",
                                            "Time from arrival to answer, successes and failures.", labels);
  queue_duration = registry->GetHistogram("weft_inference_queue_duration_seconds",
                                          "Time a request waited before its execution started.", labels);
  compute_duration = registry->GetHistogram("weft_inference_compute_duration_seconds",
                                            "Time an execution took in the backend.", labels);
}

Counter* VersionMetrics::FailureCounter(StatusCode code) {
  std::lock_guard lock(mu_);
  for (auto& [c, counter] : failures_) {
    if (c == code) return counter;
  }
  Counter* counter = registry_->GetCounter(
      "weft_inference_request_failure_total", "Requests answered with an error, by reason.",
      {{"model", model_}, {"version", version_}, {"reason", std::string(FailureReason(code))}});
  failures_.emplace_back(code, counter);
  return counter;
}

void Complete(VersionMetrics& metrics, const InferenceRequest& request, InferenceCallback& on_done,
              Result<InferenceResponse> result) {
  if (result.ok()) {
    metrics.success->Increment();
  } else {
    metrics.FailureCounter(result.status().code())->Increment();
  }
  metrics.request_duration->Observe(SecondsSince(request.arrival, std::chrono::steady_clock::now()));
  on_done(std::move(result));
}

ModelRunner::ModelRunner(std::shared_ptr<LoadedVersion> version, Options options,
                         std::shared_ptr<VersionMetrics> metrics)
    : version_(std::move(version)), options_(options), metrics_(std::move(metrics)) {
  for (auto& instance : version_->instances) {
    threads_.emplace_back([this, i = instance.get()](std::stop_token stop) { Serve(stop, i); });
  }
}

ModelRunner::~ModelRunner() {
  for (auto& t : threads_) t.request_stop();
  ready_.notify_all();
  threads_.clear();
  std::deque<Work> left;
  {
    std::lock_guard lock(mu_);
    left.swap(queue_);
  }
  for (auto& w : left) Complete(*metrics_, *w.request, w.on_done, Unavailable("the server is shutting down"));
}

void ModelRunner::Enqueue(Work work) {
  {
    std::lock_guard lock(mu_);
    if (options_.max_queue == 0 || queue_.size() < options_.max_queue) {
      queue_.push_back(std::move(work));
      ready_.notify_one();
      return;
    }
  }
  Complete(*metrics_, *work.request, work.on_done,
           ResourceExhausted("the queue of model '" + version_->config.name + "' is full (" +
                             std::to_string(options_.max_queue) + " requests)"));
}

void ModelRunner::Serve(std::stop_token stop, ModelInstance* instance) {
  while (!stop.stop_requested()) {
    Work work;
    {
      std::unique_lock lock(mu_);
      if (!ready_.wait(lock, stop, [this] { return !queue_.empty(); })) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    Run(instance, std::move(work));
  }
}

void ModelRunner::Run(ModelInstance* instance, Work work) {
  const InferenceRequest& request = *work.request;
  SteadyTime start = std::chrono::steady_clock::now();
  metrics_->queue_duration->Observe(SecondsSince(request.arrival, start));
  if (request.cancel->cancelled()) {
    Complete(*metrics_, request, work.on_done, Cancelled("the client went away before the request ran"));
    return;
  }
  if (request.deadline && start >= *request.deadline) {
    auto queued_us = std::chrono::duration_cast<Micros>(start - request.arrival).count();
    Complete(*metrics_, request, work.on_done,
             DeadlineExceeded("the request's deadline passed after " + std::to_string(queued_us) +
                              " us in the queue; it was not executed"));
    return;
  }
  const ModelConfig& config = version_->config;
  int64_t batch = BatchSizeOf(config, work.inputs);
  auto outputs = instance->Execute(work.inputs);
  SteadyTime end = std::chrono::steady_clock::now();
  metrics_->compute_duration->Observe(SecondsSince(start, end));
  metrics_->execution_count->Increment();
  metrics_->inference_count->Increment(static_cast<double>(batch));
  work.inputs.clear();  // release the request bytes as soon as the backend is done with them
  if (!outputs.ok()) {
    Complete(*metrics_, request, work.on_done, outputs.status());
    return;
  }
  auto finished = FinishOutputs(config, request, std::move(outputs).value(), batch);
  if (!finished.ok()) {
    WEFT_LOG(Error) << "model '" << config.name << "': " << finished.status().message();
    Complete(*metrics_, request, work.on_done, finished.status());
    return;
  }
  InferenceResponse response;
  response.model_name = config.name;
  response.model_version = version_->version;
  response.id = request.id;
  response.outputs = std::move(finished).value();
  Complete(*metrics_, request, work.on_done, std::move(response));
}

}  // namespace weft
