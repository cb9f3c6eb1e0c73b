#include "frontend/grpc/health_service.h"

#include <atomic>

namespace weft {

namespace {

using grpc::health::v1::HealthCheckResponse;

bool KnownService(const std::string& service) { return service.empty() || service == "inference.GRPCInferenceService"; }

HealthCheckResponse::ServingStatus StatusOf(const Engine& engine) {
  return engine.Ready() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

// Sends one status, then waits for the client to leave (or the server to stop, which cancels the call).
class WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit WatchReactor(HealthCheckResponse::ServingStatus status) {
    response_.set_status(status);
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) FinishOnce(grpc::Status::CANCELLED);
  }
  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }

 private:
  void FinishOnce(const grpc::Status& status) {
    if (!finished_.exchange(true)) Finish(status);
  }
  HealthCheckResponse response_;
  std::atomic<bool> finished_{false};
};

}  // namespace

grpc::ServerUnaryReactor* GrpcHealthService::Check(grpc::CallbackServerContext* context,
                                                   const grpc::health::v1::HealthCheckRequest* request,
                                                   HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!KnownService(request->service())) {
    counters_->Count(GrpcEndpoint::kHealth, StatusCode::kNotFound);
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
    return reactor;
  }
  response->set_status(StatusOf(*engine_));
  counters_->Count(GrpcEndpoint::kHealth, StatusCode::kOk);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* GrpcHealthService::Watch(
    grpc::CallbackServerContext*, const grpc::health::v1::HealthCheckRequest* request) {
  counters_->Count(GrpcEndpoint::kHealth, StatusCode::kOk);
  return new WatchReactor(KnownService(request->service()) ? StatusOf(*engine_) : HealthCheckResponse::SERVICE_UNKNOWN);
}

}  // namespace weft
