#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "auth/gatekeeper.h"
#include "auth/tls_files.h"
#include "base/clock.h"
#include "base/status.h"
#include "engine/engine.h"
#include "frontend/shm/shared_memory.h"
#include "lifecycle/live_repository.h"
#include "metrics/metrics.h"

namespace grpc {
class ServerBuilder;
}  // namespace grpc

namespace weft {

// The gRPC port: inference.GRPCInferenceService and grpc.health.v1.Health on gRPC's callback API. gRPC's own
// threads run the calls (no thread per call); responses over `inline_encode_bytes` are built on a few encoder
// threads owned here. Start and Stop from one thread; the rest is thread-safe. There is no connection limit:
// gRPC 1.51 has no channel argument for one (GRPC_ARG_MAX_ALLOWED_INCOMING_CONNECTIONS came later).
//
// Plaintext, connections are accepted by a GrpcAcceptor, which keeps the port alive when descriptors run out.
// With TLS (Options::tls) gRPC listens itself: 1.51 hands over accepted descriptors with insecure credentials
// only (grpc_posix.h), so on a TLS port that recovery is gRPC's, and a port that once ran out of descriptors may
// stop accepting until the server restarts. TLS is gRPC's TLS credentials over a certificate file watcher (see
// TlsServerCredentialsFor): a renewed certificate is used for new connections without dropping the open ones.
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
    // Authentication, scopes and rate limits of every call (docs/security.md); null: none. Must outlive the server.
    Gatekeeper* gatekeeper = nullptr;
    TlsFiles tls;  // certificate, key and client CA; none (the default): plaintext
  };

  // `engine` and `metrics` must outlive the server; `shared_memory` too, or null when the extension is off;
  // `repository` too, or null when the model repository RPCs answer UNIMPLEMENTED.
  GrpcServer(Options options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory,
             LiveRepository* repository = nullptr);
  ~GrpcServer();  // stops
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts serving. Unavailable when the port cannot be bound. With TLS, InvalidArgument naming the file
  // when a certificate, key or client CA file cannot be read or does not parse, or for an address that is not a
  // numeric IPv4 or IPv6 one.
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
  Status StartWithTls();
  void Configure(grpc::ServerBuilder& builder);  // message sizes and services, for both kinds of port

  struct Impl;
  const Options options_;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
};

}  // namespace weft
