#pragma once

#include <grpcpp/grpcpp.h>

#include "engine/engine.h"
#include "frontend/grpc/request_counters.h"
#include "health.grpc.pb.h"

namespace weft {

// grpc.health.v1.Health for probes and load balancers. The server ("") and inference.GRPCInferenceService are
// SERVING when every model in the repository is ready, NOT_SERVING otherwise; other names are NOT_FOUND (Check)
// or SERVICE_UNKNOWN (Watch). The engine's model set is fixed for its life, so Watch sends one status and then
// holds the stream open until the client leaves or the server stops. Thread-safe.
class GrpcHealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // `engine` and `counters` must outlive the service and every call.
  GrpcHealthService(const Engine* engine, GrpcRequestCounters* counters) : engine_(engine), counters_(counters) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  const Engine* const engine_;
  GrpcRequestCounters* const counters_;
};

}  // namespace weft
