#include "frontend/grpc/request_counters.h"

#include <string>

#include "frontend/grpc/grpc_status.h"

namespace weft {

namespace {

constexpr std::string_view kEndpointNames[] = {"health",       "server_metadata",  "model_metadata", "model_ready",
                                               "model_config", "model_statistics", "repository",     "shared_memory",
                                               "infer",        "stream_infer",     "log_settings",   "trace_setting",
                                               "unimplemented"};

}  // namespace

void GrpcRequestCounters::Count(GrpcEndpoint endpoint, StatusCode code) {
  static_assert(std::size(kEndpointNames) == kEndpoints);
  std::atomic<Counter*>& slot = counters_[static_cast<size_t>(endpoint)][static_cast<size_t>(code)];
  Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    // The registry hands every caller the same counter for the same labels, so a race here is harmless.
    counter = metrics_->GetCounter("weft_requests_total",
                                   "Requests answered, by protocol, endpoint and status (HTTP class or gRPC code).",
                                   {{"protocol", "grpc"},
                                    {"endpoint", std::string(kEndpointNames[static_cast<size_t>(endpoint)])},
                                    {"code", std::string(GrpcCodeName(GrpcCodeFor(code)))}});
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
}

}  // namespace weft
