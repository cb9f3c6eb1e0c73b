#include "frontend/grpc/grpc_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>

#include "frontend/grpc/grpc_acceptor.h"
#include "frontend/grpc/health_service.h"
#include "frontend/grpc/inference_service.h"
#include "frontend/grpc/request_counters.h"
#include "frontend/grpc/tls_credentials.h"
#include "frontend/grpc/work_queue.h"

namespace weft {

// Declaration order is destruction order in reverse: the acceptor goes first, then the gRPC server, the services it
// called, then the encoder (whose tasks finish calls, so it must run while the server drains).
struct GrpcServer::Impl {
  Impl(const Options& options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory,
       LiveRepository* repository)
      : counters(metrics),
        encoder(options.encode_threads),
        inference(InferServices{.engine = engine,
                                .shared_memory = shared_memory,
                                .counters = &counters,
                                .encoder = &encoder,
                                .inline_encode_bytes = options.inline_encode_bytes,
                                .max_stream_in_flight = std::max<size_t>(1, options.max_stream_in_flight),
                                .streams = &streams,
                                .tracer = options.tracer,
                                .gatekeeper = options.gatekeeper},
                  shared_memory, repository, {}),
        health(engine, &counters, options.gatekeeper) {}

  GrpcRequestCounters counters;
  StreamRegistry streams;
  WorkQueue encoder;
  GrpcInferenceService inference;
  GrpcHealthService health;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<GrpcAcceptor> acceptor;  // hands connections to `server` (plaintext only): goes first
  bool stopped = false;
};

GrpcServer::GrpcServer(Options options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory,
                       LiveRepository* repository)
    : options_(std::move(options)),
      impl_(std::make_unique<Impl>(options_, engine, metrics, shared_memory, repository)) {}

GrpcServer::~GrpcServer() { Stop(); }

namespace {

// gRPC's listening address for a numeric IPv4 or IPv6 address (the acceptor's rule, for both kinds of port).
Result<std::string> ListeningAddress(const std::string& address, uint16_t port) {
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return address + ":" + std::to_string(port);
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) return "[" + address + "]:" + std::to_string(port);
  return InvalidArgument("invalid listen address '" + address + "'");
}

}  // namespace

Status GrpcServer::Start() {
  if (options_.tls.enabled()) return StartWithTls();
  // Our own listener, not gRPC's: see GrpcAcceptor (gRPC 1.51 stops accepting after running out of descriptors).
  // Without SO_REUSEPORT, so that a second server on the same port fails to start instead of sharing it.
  auto acceptor = GrpcAcceptor::Listen(options_.address, options_.port);
  if (!acceptor.ok()) return Unavailable("cannot serve gRPC: " + acceptor.status().message());
  grpc::ServerBuilder builder;
  Configure(builder);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server) return Unavailable("cannot start the gRPC server");
  impl_->acceptor = std::move(acceptor).value();
  impl_->acceptor->Start(impl_->server.get());
  port_ = impl_->acceptor->port();
  return Status::Ok();
}

Status GrpcServer::StartWithTls() {
  WEFT_ASSIGN_OR_RETURN(std::string address, ListeningAddress(options_.address, options_.port));
  WEFT_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials, TlsServerCredentialsFor(options_.tls));
  grpc::ServerBuilder builder;
  Configure(builder);
  // gRPC's listener sets SO_REUSEPORT unless told not to: a second server on the port must fail, as in plaintext.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int selected_port = 0;
  builder.AddListeningPort(address, credentials, &selected_port);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || selected_port <= 0) {
    impl_->server.reset();
    return Unavailable("cannot serve gRPC with TLS on " + address + ": the port cannot be bound");
  }
  port_ = static_cast<uint16_t>(selected_port);
  return Status::Ok();
}

void GrpcServer::Configure(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX)));
  builder.RegisterService(&impl_->inference);
  builder.RegisterService(&impl_->health);
}

void GrpcServer::BeginDraining() {
  impl_->inference.BeginDraining();
  impl_->health.BeginDraining();
}

void GrpcServer::Stop() { Stop(std::chrono::steady_clock::now() + options_.drain_timeout); }

void GrpcServer::Stop(SteadyTime deadline) {
  if (!impl_->server || impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->acceptor) impl_->acceptor->Stop();  // no new connections; GOAWAY (below) tells the open ones
  // Streams that their clients keep open would hold the stop until the deadline: they end once idle.
  impl_->health.EndWatches();
  impl_->streams.EndAll();
  // gRPC's deadline is on the system clock.
  auto left = std::max(SteadyTime::duration::zero(), deadline - std::chrono::steady_clock::now());
  impl_->server->Shutdown(std::chrono::system_clock::now() +
                          std::chrono::duration_cast<std::chrono::system_clock::duration>(left));
  impl_->server->Wait();
}

}  // namespace weft
