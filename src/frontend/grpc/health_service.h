#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "auth/gatekeeper.h"
#include "engine/engine.h"
#include "frontend/grpc/request_counters.h"
#include "health.grpc.pb.h"

namespace weft {

// grpc.health.v1.Health for probes and load balancers. The server ("") and inference.GRPCInferenceService are
// SERVING when every model in the repository is ready and the server is not shutting down, NOT_SERVING otherwise;
// other names are NOT_FOUND (Check) or SERVICE_UNKNOWN (Watch). The engine's model set is fixed for its life, so
// the only change a Watch stream can see is BeginDraining's NOT_SERVING; it sends the first status, that change if
// it comes, and holds the stream open until the client leaves or the server stops (EndWatches). Thread-safe.
class GrpcHealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  class WatchReactor;

  // `engine` and `counters` must outlive the service and every call; `gatekeeper` too, or null. The checks are open
  // unless the gatekeeper protects health (--auth-protect-health).
  GrpcHealthService(const Engine* engine, GrpcRequestCounters* counters, Gatekeeper* gatekeeper = nullptr)
      : engine_(engine), counters_(counters), gatekeeper_(gatekeeper) {}

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) override;

  // The server is shutting down: NOT_SERVING from now on, sent to every open Watch too. Idempotent.
  void BeginDraining();
  // The server stops: every open Watch ends (UNAVAILABLE), so that none holds the stop until its deadline.
  void EndWatches();

 private:
  friend class WatchReactor;
  grpc::health::v1::HealthCheckResponse::ServingStatus Status() const;
  void Forget(WatchReactor* watch);

  // Ok, or why the call is refused.
  weft::Status Admit(const grpc::CallbackServerContext& context, std::string_view method) const;

  const Engine* const engine_;
  GrpcRequestCounters* const counters_;
  Gatekeeper* const gatekeeper_;
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  // Watches of a known service, until their OnDone; a reactor is deleted only after it has left this set.
  std::unordered_set<WatchReactor*> watches_;  // guarded by mu_
};

}  // namespace weft
