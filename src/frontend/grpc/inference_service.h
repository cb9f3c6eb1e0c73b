#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "frontend/grpc/request_counters.h"
#include "frontend/grpc/stream_infer.h"
#include "frontend/shm/shared_memory.h"
#include "grpc_service.grpc.pb.h"
#include "lifecycle/live_repository.h"
#include "metrics/metrics.h"

namespace weft {

// Allocates each ModelInfer request in a shared_ptr, so that raw input tensors can view the request's bytes
// and keep them alive after gRPC is done with the call (an output of an identity model is its input).
class InferMessageAllocator final
    : public grpc::MessageAllocator<inference::ModelInferRequest, inference::ModelInferResponse> {
 public:
  class Holder;
  grpc::MessageHolder<inference::ModelInferRequest, inference::ModelInferResponse>* AllocateMessages() override;
  // The shared request of a call whose messages this allocator made.
  static std::shared_ptr<const inference::ModelInferRequest> SharedRequest(grpc::CallbackServerContext* context);
};

// inference.GRPCInferenceService on gRPC's callback API: no thread per call. Unary RPCs are answered on the
// thread that gRPC calls them on; inference is submitted to the engine and finished from the engine's callback
// (large responses are built on the encoder's threads). Thread-safe.
class GrpcInferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  struct Options {
    std::string server_name = "weft";
    std::string server_version;  // empty = this build's version
  };

  // Everything in `services` must outlive the service and every call it started; `repository` too, or null (the
  // model repository RPCs answer UNIMPLEMENTED).
  GrpcInferenceService(const InferServices& services, SharedMemoryRegistry* shared_memory, LiveRepository* repository,
                       Options options);

  // The server is shutting down: ServerReady answers false from now on; everything else goes on serving.
  // Thread-safe; idempotent.
  void BeginDraining() { draining_.store(true, std::memory_order_relaxed); }

  using Reactor = grpc::ServerUnaryReactor;
  using Context = grpc::CallbackServerContext;

  Reactor* ServerLive(Context* c, const inference::ServerLiveRequest* q, inference::ServerLiveResponse* r) override;
  Reactor* ServerReady(Context* c, const inference::ServerReadyRequest* q, inference::ServerReadyResponse* r) override;
  Reactor* ModelReady(Context* c, const inference::ModelReadyRequest* q, inference::ModelReadyResponse* r) override;
  Reactor* ServerMetadata(Context* c, const inference::ServerMetadataRequest* q,
                          inference::ServerMetadataResponse* r) override;
  Reactor* ModelMetadata(Context* c, const inference::ModelMetadataRequest* q,
                         inference::ModelMetadataResponse* r) override;
  Reactor* ModelInfer(Context* c, const inference::ModelInferRequest* q, inference::ModelInferResponse* r) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      Context* c) override;
  Reactor* ModelConfig(Context* c, const inference::ModelConfigRequest* q, inference::ModelConfigResponse* r) override;
  Reactor* ModelStatistics(Context* c, const inference::ModelStatisticsRequest* q,
                           inference::ModelStatisticsResponse* r) override;
  Reactor* RepositoryIndex(Context* c, const inference::RepositoryIndexRequest* q,
                           inference::RepositoryIndexResponse* r) override;
  Reactor* RepositoryModelLoad(Context* c, const inference::RepositoryModelLoadRequest* q,
                               inference::RepositoryModelLoadResponse* r) override;
  Reactor* RepositoryModelUnload(Context* c, const inference::RepositoryModelUnloadRequest* q,
                                 inference::RepositoryModelUnloadResponse* r) override;
  Reactor* SystemSharedMemoryStatus(Context* c, const inference::SystemSharedMemoryStatusRequest* q,
                                    inference::SystemSharedMemoryStatusResponse* r) override;
  Reactor* SystemSharedMemoryRegister(Context* c, const inference::SystemSharedMemoryRegisterRequest* q,
                                      inference::SystemSharedMemoryRegisterResponse* r) override;
  Reactor* SystemSharedMemoryUnregister(Context* c, const inference::SystemSharedMemoryUnregisterRequest* q,
                                        inference::SystemSharedMemoryUnregisterResponse* r) override;
  Reactor* CudaSharedMemoryStatus(Context* c, const inference::CudaSharedMemoryStatusRequest* q,
                                  inference::CudaSharedMemoryStatusResponse* r) override;
  Reactor* CudaSharedMemoryRegister(Context* c, const inference::CudaSharedMemoryRegisterRequest* q,
                                    inference::CudaSharedMemoryRegisterResponse* r) override;
  Reactor* CudaSharedMemoryUnregister(Context* c, const inference::CudaSharedMemoryUnregisterRequest* q,
                                      inference::CudaSharedMemoryUnregisterResponse* r) override;
  Reactor* TraceSetting(Context* c, const inference::TraceSettingRequest* q,
                        inference::TraceSettingResponse* r) override;
  Reactor* LogSettings(Context* c, const inference::LogSettingsRequest* q, inference::LogSettingsResponse* r) override;

 private:
  // Counts the call and finishes it with `status` on the context's default reactor.
  Reactor* Answer(Context* context, GrpcEndpoint endpoint, const Status& status);
  // Null when the call may go on (its admission in `admitted`, when given); else the reactor that refused it
  // (UNAUTHENTICATED, PERMISSION_DENIED or RESOURCE_EXHAUSTED, counted under `endpoint`).
  Reactor* Refuse(Context* context, GrpcEndpoint endpoint, Permission permission, std::string_view model,
                  std::string_view method, Admission* admitted = nullptr);
  // The audit line of an admin action, once answered.
  void Audit(const Admission& admission, std::string_view method, const Status& outcome) const;

  const InferServices services_;
  SharedMemoryRegistry* const shared_memory_;  // null: the extension is off
  LiveRepository* const repository_;           // null: the model repository extension is off
  const Options options_;
  InferMessageAllocator allocator_;
  std::atomic<bool> draining_{false};
};

}  // namespace weft
