#include "frontend/grpc/grpc_server.h"

#include <grpcpp/grpcpp.h>

#include "frontend/grpc/health_service.h"
#include "frontend/grpc/inference_service.h"
#include "frontend/grpc/request_counters.h"
#include "frontend/grpc/work_queue.h"

namespace weft {

// Declaration order is destruction order in reverse: the gRPC server goes first, then the services it called,
// then the encoder (whose tasks finish calls, so it must run while the server drains).
struct GrpcServer::Impl {
  Impl(const Options& options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory)
      : counters(metrics),
        encoder(options.encode_threads),
        inference(InferServices{.engine = engine,
                                .shared_memory = shared_memory,
                                .counters = &counters,
                                .encoder = &encoder,
                                .inline_encode_bytes = options.inline_encode_bytes,
                                .max_stream_in_flight = std::max<size_t>(1, options.max_stream_in_flight)},
                  shared_memory, metrics, {}),
        health(engine, &counters) {}

  GrpcRequestCounters counters;
  WorkQueue encoder;
  GrpcInferenceService inference;
  GrpcHealthService health;
  std::unique_ptr<grpc::Server> server;
  bool stopped = false;
};

GrpcServer::GrpcServer(Options options, Engine* engine, MetricsRegistry* metrics, SharedMemoryRegistry* shared_memory)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, engine, metrics, shared_memory)) {}

GrpcServer::~GrpcServer() { Stop(); }

Status GrpcServer::Start() {
  grpc::ServerBuilder builder;
  int bound = 0;
  std::string address = options_.address + ":" + std::to_string(options_.port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &bound);
  // gRPC sets SO_REUSEPORT by default, so a second server on the same port would start and share it silently.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(std::min<int64_t>(options_.max_message_bytes, INT32_MAX)));
  builder.RegisterService(&impl_->inference);
  builder.RegisterService(&impl_->health);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || bound == 0) {
    impl_->server.reset();
    return Unavailable("cannot serve gRPC on " + address);
  }
  port_ = static_cast<uint16_t>(bound);
  return Status::Ok();
}

void GrpcServer::Stop() {
  if (!impl_->server || impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + options_.drain_timeout);
  impl_->server->Wait();
}

}  // namespace weft
