#include "frontend/grpc/health_service.h"

#include <optional>

#include "frontend/grpc/grpc_status.h"
#include "frontend/grpc/stream_infer.h"

namespace weft {

using grpc::health::v1::HealthCheckResponse;

namespace {

bool KnownService(const std::string& service) { return service.empty() || service == "inference.GRPCInferenceService"; }

}  // namespace

// Sends the status, then a change of it (NOT_SERVING when the server drains), then waits for the client to leave
// (or the server to stop, which cancels the call). One write at a time: a change that comes while a write is in
// progress is sent after it.
class GrpcHealthService::WatchReactor final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  // `fixed`: an unknown service's watch, whose status never changes (it still ends when the server stops).
  WatchReactor(GrpcHealthService* service, HealthCheckResponse::ServingStatus status, bool fixed = false)
      : service_(service), fixed_(fixed) {
    response_.set_status(status);
    writing_ = true;
    StartWrite(&response_);
  }

  // A new status for the client. Called under the service's mu_, so the reactor is alive.
  void Update(HealthCheckResponse::ServingStatus status) {
    if (fixed_) return;
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      if (writing_) {
        pending_ = status;
        return;
      }
      if (status == response_.status()) return;
      response_.set_status(status);
      writing_ = true;
    }
    StartWrite(&response_);  // outside mu_: gRPC may run OnWriteDone on another thread before it returns
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return FinishOnce(grpc::Status::CANCELLED);
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (finished_ || !pending_ || *pending_ == response_.status()) return;
      response_.set_status(*pending_);
      pending_.reset();
      writing_ = true;
    }
    StartWrite(&response_);
  }
  void OnCancel() override { FinishOnce(grpc::Status::CANCELLED); }
  void End() { FinishOnce(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down")); }
  void OnDone() override {
    service_->Forget(this);
    delete this;
  }

 private:
  void FinishOnce(const grpc::Status& status) {
    {
      std::lock_guard lock(mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  GrpcHealthService* const service_;
  const bool fixed_;
  std::mutex mu_;
  HealthCheckResponse response_;                               // guarded by mu_ while no write uses it
  bool writing_ = false;                                       // guarded by mu_
  std::optional<HealthCheckResponse::ServingStatus> pending_;  // guarded by mu_
  bool finished_ = false;                                      // guarded by mu_
};

namespace {

// A Watch without the credential that protected health checks need: finished at once.
class RefusedWatch final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

HealthCheckResponse::ServingStatus GrpcHealthService::Status() const {
  return !draining_.load(std::memory_order_relaxed) && engine_->Ready() ? HealthCheckResponse::SERVING
                                                                        : HealthCheckResponse::NOT_SERVING;
}

weft::Status GrpcHealthService::Admit(const grpc::CallbackServerContext& context, std::string_view method) const {
  return AdmitCall(InferServices{.gatekeeper = gatekeeper_}, context, Permission::kHealth, {}, method).status;
}

grpc::ServerUnaryReactor* GrpcHealthService::Check(grpc::CallbackServerContext* context,
                                                   const grpc::health::v1::HealthCheckRequest* request,
                                                   HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (weft::Status admitted = Admit(*context, "Health/Check"); !admitted.ok()) {
    counters_->Count(GrpcEndpoint::kHealth, admitted.code());
    reactor->Finish(ToGrpcStatus(admitted));
    return reactor;
  }
  if (!KnownService(request->service())) {
    counters_->Count(GrpcEndpoint::kHealth, StatusCode::kNotFound);
    reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
    return reactor;
  }
  response->set_status(Status());
  counters_->Count(GrpcEndpoint::kHealth, StatusCode::kOk);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* GrpcHealthService::Watch(
    grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) {
  if (weft::Status admitted = Admit(*context, "Health/Watch"); !admitted.ok()) {
    counters_->Count(GrpcEndpoint::kHealth, admitted.code());
    return new RefusedWatch(ToGrpcStatus(admitted));
  }
  counters_->Count(GrpcEndpoint::kHealth, StatusCode::kOk);
  std::lock_guard lock(mu_);
  // Under mu_, so that a BeginDraining that comes now either finds the watch or is seen by Status(). An unknown
  // service's watch is kept too, so that EndWatches ends it rather than leave the server's stop waiting for it.
  auto* watch = KnownService(request->service())
                    ? new WatchReactor(this, Status())
                    : new WatchReactor(this, HealthCheckResponse::SERVICE_UNKNOWN, /*fixed=*/true);
  watches_.insert(watch);
  return watch;
}

void GrpcHealthService::BeginDraining() {
  std::lock_guard lock(mu_);
  draining_.store(true, std::memory_order_relaxed);
  for (WatchReactor* watch : watches_) watch->Update(HealthCheckResponse::NOT_SERVING);
}

void GrpcHealthService::EndWatches() {
  std::lock_guard lock(mu_);
  for (WatchReactor* watch : watches_) watch->End();
}

void GrpcHealthService::Forget(WatchReactor* watch) {
  std::lock_guard lock(mu_);
  watches_.erase(watch);
}

}  // namespace weft
