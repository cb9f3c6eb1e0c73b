#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/clock.h"
#include "base/status.h"
#include "engine/engine.h"
#include "frontend/shm/shared_memory.h"
#include "lifecycle/live_repository.h"
#include "metrics/metrics.h"

namespace weft {

// The gRPC port: inference.GRPCInferenceService and grpc.health.v1.Health on gRPC's callback API. gRPC's own
// threads run the calls (no thread per call); responses over `inline_encode_bytes` are built on a few encoder
// threads owned here. Start and Stop from one thread; the rest is thread-safe. There is no connection limit:
// gRPC 1.51 has no channel argument for one (GRPC_ARG_MAX_ALLOWED_INCOMING_CONNECTIONS came later).
class GrpcServer {
 public:
  struct Options {
    std::string address = "0.0.0.0";
    uint16_t port = 8001;                    // 0 = any free port
    int64_t max_message_bytes = 64ll << 20;  // largest request or response message
    int encode_threads = 2;
    size_t inline_encode_bytes = 64 << 10;          // responses up to this are built on the engine's thread
    size_t max_stream_in_flight = 64;               // unanswered requests per ModelStreamInfer call
    std::chrono::milliseconds drain_timeout{5000};  // Stop() waits this long for calls, then cancels them
    Tracer* tracer = nullptr;  // samples ModelInfer calls and answers TraceSetting; null: off. Must outlive the server.
  };

  // `engine` and `metrics` must outlive the server; `shared_memory` too, or null when the extension is off;
  // `repository` too, or null when the model repository RPCs answer UNIMPLEMENTED.
  GrpcServer(Options options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory,
             LiveRepository* repository = nullptr);
  ~GrpcServer();  // stops
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving. Unavailable when the port cannot be bound.
  Status Start();
  // Readiness goes false (ServerReady, grpc.health.v1 NOT_SERVING, pushed to Watch streams); every call is still
  // served. Thread-safe; idempotent.
  void BeginDraining();
  // Stop(now + drain_timeout).
  void Stop();
  // Stops listening and refuses new calls (GOAWAY), lets calls in flight finish until `deadline`, cancels the
  // rest (their clients get CANCELLED), and returns once every call is done: a call whose engine callback never
  // comes (an execution that does not return) keeps it waiting. Idempotent.
  void Stop(SteadyTime deadline);
  // The bound port (useful with port 0); 0 before Start.
  uint16_t port() const { return port_; }

 private:
  struct Impl;
  const Options options_;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace weft
