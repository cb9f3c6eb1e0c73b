#include "frontend/grpc/inference_service.h"

#include <optional>
#include <vector>

#include "base/log.h"
#include "frontend/grpc/grpc_status.h"
#include "frontend/grpc/infer_message.h"
#include "frontend/grpc/model_queries.h"

#ifndef WEFT_VERSION
#define WEFT_VERSION "unknown"
#endif

namespace weft {

using namespace inference;  // NOLINT(google-build-using-namespace): the generated message names, in this file only

class InferMessageAllocator::Holder final : public grpc::MessageHolder<ModelInferRequest, ModelInferResponse> {
 public:
  Holder() : request_(std::make_shared<ModelInferRequest>()) {
    set_request(request_.get());
    set_response(&response_);
  }
  void Release() override { delete this; }
  const std::shared_ptr<ModelInferRequest>& shared_request() const { return request_; }

 private:
  std::shared_ptr<ModelInferRequest> request_;  // shared with the tensors that view it
  ModelInferResponse response_;
};

grpc::MessageHolder<ModelInferRequest, ModelInferResponse>* InferMessageAllocator::AllocateMessages() {
  return new Holder();
}

std::shared_ptr<const ModelInferRequest> InferMessageAllocator::SharedRequest(grpc::CallbackServerContext* context) {
  auto* holder = dynamic_cast<Holder*>(context->GetRpcAllocatorState());
  return holder ? holder->shared_request() : nullptr;
}

namespace {

// One ModelInfer call. The engine's callback finishes it; a cancelled call (the client went away, or its
// deadline passed) cancels the request, which leaves its queue at once. Deletes itself when gRPC is done (OnDone
// comes only after Finish, which is the last thing the engine's callback does).
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(std::shared_ptr<CancelToken> cancel, std::shared_ptr<RequestTrace> trace)
      : cancel_(std::move(cancel)), trace_(std::move(trace)) {}
  void OnCancel() override { cancel_->Cancel(); }
  // Both reactions are short and never block (a cancel takes the scheduler's lock for a moment), so gRPC may run
  // them on the thread that completes the call instead of handing each call's OnDone to its executor thread: that
  // hand-off was a thread switch per request and 5.6 of the 66 µs a small gRPC request cost the server
  // (docs/benchmarks.md). gRPC marks this hook as not part of its API; 1.51 honours it for OnDone and OnCancel,
  // and the gRPC tests check cancellation and deadlines with it.
  bool InternalInlineable() override { return true; }
  void OnDone() override {
    if (trace_) trace_->End();
    delete this;
  }

 private:
  const std::shared_ptr<CancelToken> cancel_;
  const std::shared_ptr<RequestTrace> trace_;
};

// A ModelStreamInfer call without a valid credential: finished at once, before anything is read.
class RefusedStream final : public grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

Status RepositoryOff() { return Unimplemented("the model repository extension is not enabled on this server"); }

Status SharedMemoryOff() {
  return Unimplemented(
      "shared memory (system and CUDA) is not enabled on this server (weft serve "
      "--allow-shared-memory)");
}

}  // namespace

GrpcInferenceService::GrpcInferenceService(const InferServices& services, SharedMemoryRegistry* shared_memory,
                                           LiveRepository* repository, Options options)
    : services_(services), shared_memory_(shared_memory), repository_(repository), options_(std::move(options)) {
  SetMessageAllocatorFor_ModelInfer(&allocator_);
}

GrpcInferenceService::Reactor* GrpcInferenceService::Answer(Context* context, GrpcEndpoint endpoint,
                                                            const Status& status) {
  services_.counters->Count(endpoint, status.code());
  Reactor* reactor = context->DefaultReactor();
  AddRetryAfter(status, context);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

GrpcInferenceService::Reactor* GrpcInferenceService::Refuse(Context* context, GrpcEndpoint endpoint,
                                                            Permission permission, std::string_view model,
                                                            std::string_view method, Admission* admitted) {
  Admission admission = AdmitCall(services_, *context, permission, model, method);
  if (!admission.status.ok()) return Answer(context, endpoint, admission.status);
  if (admitted != nullptr) *admitted = std::move(admission);
  return nullptr;
}

void GrpcInferenceService::Audit(const Admission& admission, std::string_view method, const Status& outcome) const {
  if (services_.gatekeeper == nullptr || !services_.gatekeeper->active()) return;
  services_.gatekeeper->AuditAdmin(admission, method, StatusCodeName(outcome.code()));
}

GrpcInferenceService::Reactor* GrpcInferenceService::ServerLive(Context* c, const ServerLiveRequest*,
                                                                ServerLiveResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kHealth, Permission::kHealth, {}, "ServerLive")) return refused;
  r->set_live(true);
  return Answer(c, GrpcEndpoint::kHealth, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::ServerReady(Context* c, const ServerReadyRequest*,
                                                                 ServerReadyResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kHealth, Permission::kHealth, {}, "ServerReady")) return refused;
  r->set_ready(!draining_.load(std::memory_order_relaxed) && services_.engine->Ready());
  return Answer(c, GrpcEndpoint::kHealth, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::ModelReady(Context* c, const ModelReadyRequest* q,
                                                                ModelReadyResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kModelReady, Permission::kMetadata, {}, "ModelReady")) return refused;
  Result<int64_t> version = ParseModelVersion(q->name(), q->version());
  if (!version.ok()) return Answer(c, GrpcEndpoint::kModelReady, version.status());
  // Not ready, not an error, for a model or version that is unknown, as in Triton: a client that unloaded a model
  // polls its readiness until it is false (tritonclient's is_model_ready raises on an error).
  auto found = services_.engine->FindVersion(q->name(), *version);
  r->set_ready(found.ok());
  return Answer(c, GrpcEndpoint::kModelReady, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::ServerMetadata(Context* c, const ServerMetadataRequest*,
                                                                    ServerMetadataResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kServerMetadata, Permission::kMetadata, {}, "ServerMetadata")) {
    return refused;
  }
  r->set_name(options_.server_name);
  r->set_version(options_.server_version.empty() ? WEFT_VERSION : options_.server_version);
  for (const char* e : {"classification", "logging", "model_configuration", "parameters", "statistics", "trace"})
    r->add_extensions(e);
  if (shared_memory_) r->add_extensions("system_shared_memory");
  if (shared_memory_ && SharedMemoryRegistry::CudaAvailable()) r->add_extensions("cuda_shared_memory");
  if (repository_) {
    r->add_extensions("model_repository");
    r->add_extensions("model_repository(unload_dependents)");
  }
  return Answer(c, GrpcEndpoint::kServerMetadata, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::ModelMetadata(Context* c, const ModelMetadataRequest* q,
                                                                   ModelMetadataResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kModelMetadata, Permission::kMetadata, {}, "ModelMetadata")) {
    return refused;
  }
  return Answer(c, GrpcEndpoint::kModelMetadata, FillModelMetadata(*services_.engine, *q, r));
}

GrpcInferenceService::Reactor* GrpcInferenceService::ModelConfig(Context* c, const ModelConfigRequest* q,
                                                                 ModelConfigResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kModelConfig, Permission::kMetadata, {}, "ModelConfig"))
    return refused;
  return Answer(c, GrpcEndpoint::kModelConfig, FillModelConfig(*services_.engine, *q, r));
}

GrpcInferenceService::Reactor* GrpcInferenceService::ModelStatistics(Context* c, const ModelStatisticsRequest* q,
                                                                     ModelStatisticsResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kModelStatistics, Permission::kMetadata, {}, "ModelStatistics")) {
    return refused;
  }
  return Answer(c, GrpcEndpoint::kModelStatistics, FillModelStatistics(*services_.engine, *q, r));
}

GrpcInferenceService::Reactor* GrpcInferenceService::RepositoryIndex(Context* c, const RepositoryIndexRequest* q,
                                                                     RepositoryIndexResponse* r) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kRepository, Permission::kAdmin, {}, "RepositoryIndex"))
    return refused;
  if (!repository_) return Answer(c, GrpcEndpoint::kRepository, RepositoryOff());
  for (LiveRepository::IndexEntry& e : repository_->Index(q->ready())) {
    auto* model = r->add_models();
    model->set_name(std::move(e.name));
    if (e.version != 0) model->set_version(std::to_string(e.version));
    model->set_state(std::move(e.state));
    model->set_reason(std::move(e.reason));
  }
  return Answer(c, GrpcEndpoint::kRepository, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::ModelInfer(Context* c, const ModelInferRequest* q,
                                                                ModelInferResponse* response) {
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kInfer, Permission::kInfer, q->model_name(), "ModelInfer")) {
    return refused;
  }
  SteadyTime arrival = std::chrono::steady_clock::now();
  std::shared_ptr<const ModelInferRequest> message = InferMessageAllocator::SharedRequest(c);
  if (!message) return Answer(c, GrpcEndpoint::kInfer, Internal("ModelInfer without its message allocator"));
  Result<DecodedModelInfer> decoded = DecodeModelInferRequest(message, arrival, services_.shared_memory);
  if (!decoded.ok()) return Answer(c, GrpcEndpoint::kInfer, decoded.status());

  std::unique_ptr<InferenceRequest> request = std::move(decoded->request);
  ApplyCallDeadline(c->raw_deadline(), request.get());
  ApplyRouteKey(c->client_metadata(), request.get());
  StartTrace(services_, c->client_metadata(), TraceProtocol::kGrpc, arrival, request.get());
  auto* reactor = new InferReactor(request->cancel, request->trace);
  struct Pending {
    std::vector<std::string> requested;
    SharedMemoryOutputs shared_memory_outputs;
    std::vector<SharedMemorySlice> shared_memory_inputs;
  };
  auto pending = std::make_shared<Pending>(Pending{
      request->requested_outputs, std::move(decoded->shared_memory_outputs), std::move(decoded->shared_memory_inputs)});
  const InferServices* services = &services_;
  std::shared_ptr<RequestTrace> trace = request->trace;
  services_.engine->Submit(
      std::move(request), [services, c, reactor, response, pending, trace](Result<InferenceResponse> result) {
        EncodeSoonAfter(*services, result, [services, c, reactor, response, pending, trace, result] {
          Status status = result.ok()
                              ? EncodeModelInferResponse(*result, pending->requested, pending->shared_memory_outputs,
                                                         pending->shared_memory_inputs, response)
                              : result.status();
          services->counters->Count(GrpcEndpoint::kInfer, status.code());
          AddRetryAfter(status, c);
          if (trace) trace->Stamp(TraceStage::kSendStart);
          reactor->Finish(ToGrpcStatus(status));
        });
      });
  return reactor;
}

grpc::ServerBidiReactor<ModelInferRequest, ModelStreamInferResponse>* GrpcInferenceService::ModelStreamInfer(
    Context* c) {
  Status authenticated = AuthenticateCall(services_, *c, "ModelStreamInfer");
  if (!authenticated.ok()) {
    services_.counters->Count(GrpcEndpoint::kStreamInfer, authenticated.code());
    return new RefusedStream(ToGrpcStatus(authenticated));
  }
  return new StreamInferReactor(c, services_);
}

GrpcInferenceService::Reactor* GrpcInferenceService::SystemSharedMemoryStatus(Context* c,
                                                                              const SystemSharedMemoryStatusRequest* q,
                                                                              SystemSharedMemoryStatusResponse* r) {
  if (Reactor* refused =
          Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {}, "SystemSharedMemoryStatus")) {
    return refused;
  }
  if (!shared_memory_) return Answer(c, GrpcEndpoint::kSharedMemory, SharedMemoryOff());
  auto regions = shared_memory_->Regions(q->name());
  if (!regions.ok()) return Answer(c, GrpcEndpoint::kSharedMemory, regions.status());
  for (const SharedMemoryRegionStatus& region : *regions) {
    auto& status = (*r->mutable_regions())[region.name];
    status.set_name(region.name);
    status.set_key(region.key);
    status.set_offset(region.offset);
    status.set_byte_size(region.byte_size);
  }
  return Answer(c, GrpcEndpoint::kSharedMemory, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::SystemSharedMemoryRegister(
    Context* c, const SystemSharedMemoryRegisterRequest* q, SystemSharedMemoryRegisterResponse*) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {},
                                "SystemSharedMemoryRegister", &admission)) {
    return refused;
  }
  Status status =
      shared_memory_ ? shared_memory_->Register(q->name(), q->key(), q->offset(), q->byte_size()) : SharedMemoryOff();
  Audit(admission, "SystemSharedMemoryRegister", status);
  return Answer(c, GrpcEndpoint::kSharedMemory, status);
}

GrpcInferenceService::Reactor* GrpcInferenceService::SystemSharedMemoryUnregister(
    Context* c, const SystemSharedMemoryUnregisterRequest* q, SystemSharedMemoryUnregisterResponse*) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {},
                                "SystemSharedMemoryUnregister", &admission)) {
    return refused;
  }
  if (!shared_memory_) return Answer(c, GrpcEndpoint::kSharedMemory, SharedMemoryOff());
  if (q->name().empty()) {
    shared_memory_->UnregisterAll();
  } else {
    shared_memory_->Unregister(q->name());
  }
  Audit(admission, "SystemSharedMemoryUnregister", Status::Ok());
  return Answer(c, GrpcEndpoint::kSharedMemory, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::RepositoryModelLoad(Context* c,
                                                                         const RepositoryModelLoadRequest* q,
                                                                         RepositoryModelLoadResponse*) {
  Admission admission;
  if (Reactor* refused =
          Refuse(c, GrpcEndpoint::kRepository, Permission::kAdmin, {}, "RepositoryModelLoad", &admission)) {
    return refused;
  }
  if (!repository_) return Answer(c, GrpcEndpoint::kRepository, RepositoryOff());
  std::optional<std::string> config;
  for (const auto& [key, value] : q->parameters()) {
    if (key == "config") {
      if (value.parameter_choice_case() != ModelRepositoryParameter::kStringParam) {
        return Answer(c, GrpcEndpoint::kRepository,
                      InvalidArgument("parameter 'config' must be a string_param holding the model configuration "
                                      "as JSON"));
      }
      config = value.string_param();
    } else if (key.starts_with("file:")) {
      return Answer(c, GrpcEndpoint::kRepository,
                    Unimplemented("parameter '" + key +
                                  "': model files in the load request are not supported; put them in the model "
                                  "repository"));
    } else {
      return Answer(c, GrpcEndpoint::kRepository,
                    InvalidArgument("unknown load parameter '" + key + "' (known: config)"));
    }
  }
  // Answered when the model has loaded or failed, from the live repository's thread.
  Reactor* reactor = c->DefaultReactor();
  repository_->Load(q->model_name(), std::move(config),
                    [this, admission = std::move(admission), counters = services_.counters, reactor](Status status) {
                      Audit(admission, "RepositoryModelLoad", status);
                      counters->Count(GrpcEndpoint::kRepository, status.code());
                      reactor->Finish(ToGrpcStatus(status));
                    });
  return reactor;
}

GrpcInferenceService::Reactor* GrpcInferenceService::RepositoryModelUnload(Context* c,
                                                                           const RepositoryModelUnloadRequest* q,
                                                                           RepositoryModelUnloadResponse*) {
  Admission admission;
  if (Reactor* refused =
          Refuse(c, GrpcEndpoint::kRepository, Permission::kAdmin, {}, "RepositoryModelUnload", &admission)) {
    return refused;
  }
  if (!repository_) return Answer(c, GrpcEndpoint::kRepository, RepositoryOff());
  for (const auto& [key, value] : q->parameters()) {
    // Models load alone here (no ensembles), so unload_dependents has nothing more to unload.
    if (key != "unload_dependents") {
      return Answer(c, GrpcEndpoint::kRepository,
                    InvalidArgument("unknown unload parameter '" + key + "' (known: unload_dependents)"));
    }
    if (value.parameter_choice_case() != ModelRepositoryParameter::kBoolParam) {
      return Answer(c, GrpcEndpoint::kRepository,
                    InvalidArgument("parameter 'unload_dependents' must be a bool_param"));
    }
  }
  Reactor* reactor = c->DefaultReactor();
  repository_->Unload(q->model_name(),
                      [this, admission = std::move(admission), counters = services_.counters, reactor](Status status) {
                        Audit(admission, "RepositoryModelUnload", status);
                        counters->Count(GrpcEndpoint::kRepository, status.code());
                        reactor->Finish(ToGrpcStatus(status));
                      });
  return reactor;
}

GrpcInferenceService::Reactor* GrpcInferenceService::CudaSharedMemoryStatus(Context* c,
                                                                            const CudaSharedMemoryStatusRequest* q,
                                                                            CudaSharedMemoryStatusResponse* r) {
  if (Reactor* refused =
          Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {}, "CudaSharedMemoryStatus")) {
    return refused;
  }
  if (!shared_memory_) return Answer(c, GrpcEndpoint::kSharedMemory, SharedMemoryOff());
  auto regions = shared_memory_->CudaRegions(q->name());
  if (!regions.ok()) return Answer(c, GrpcEndpoint::kSharedMemory, regions.status());
  for (const CudaSharedMemoryRegionStatus& region : *regions) {
    auto& status = (*r->mutable_regions())[region.name];
    status.set_name(region.name);
    status.set_device_id(static_cast<uint64_t>(region.device_id));
    status.set_byte_size(region.byte_size);
  }
  return Answer(c, GrpcEndpoint::kSharedMemory, Status::Ok());
}

GrpcInferenceService::Reactor* GrpcInferenceService::CudaSharedMemoryRegister(Context* c,
                                                                              const CudaSharedMemoryRegisterRequest* q,
                                                                              CudaSharedMemoryRegisterResponse*) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {},
                                "CudaSharedMemoryRegister", &admission)) {
    return refused;
  }
  const std::string& handle = q->raw_handle();
  Status status = shared_memory_
                      ? shared_memory_->RegisterCuda(q->name(), std::as_bytes(std::span(handle.data(), handle.size())),
                                                     q->device_id(), q->byte_size())
                      : SharedMemoryOff();
  Audit(admission, "CudaSharedMemoryRegister", status);
  return Answer(c, GrpcEndpoint::kSharedMemory, status);
}

GrpcInferenceService::Reactor* GrpcInferenceService::CudaSharedMemoryUnregister(
    Context* c, const CudaSharedMemoryUnregisterRequest* q, CudaSharedMemoryUnregisterResponse*) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kSharedMemory, Permission::kSharedMemory, {},
                                "CudaSharedMemoryUnregister", &admission)) {
    return refused;
  }
  if (!shared_memory_) return Answer(c, GrpcEndpoint::kSharedMemory, SharedMemoryOff());
  if (q->name().empty()) {
    shared_memory_->UnregisterAllCuda();
  } else {
    shared_memory_->UnregisterCuda(q->name());
  }
  Audit(admission, "CudaSharedMemoryUnregister", Status::Ok());
  return Answer(c, GrpcEndpoint::kSharedMemory, Status::Ok());
}

// Triton's trace extension: the settings a request names are applied (all or none; an empty value list clears a
// model's setting); every answer holds the settings in force, so an empty request reads them.
GrpcInferenceService::Reactor* GrpcInferenceService::TraceSetting(Context* c, const TraceSettingRequest* q,
                                                                  TraceSettingResponse* r) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kTraceSetting, Permission::kAdmin, {}, "TraceSetting", &admission)) {
    return refused;
  }
  Tracer* tracer = services_.tracer;
  if (tracer == nullptr) {
    return Answer(c, GrpcEndpoint::kTraceSetting, Unimplemented("tracing is not enabled on this server"));
  }
  const std::string& model = q->model_name();
  if (!model.empty()) {
    auto config = services_.engine->FindConfig(model);
    if (!config.ok()) return Answer(c, GrpcEndpoint::kTraceSetting, config.status());
  }
  std::map<std::string, std::vector<std::string>> now;
  if (q->settings().empty()) {
    now = tracer->View(model);
  } else {
    TraceSettingUpdate update;
    for (const auto& [name, value] : q->settings()) {
      if (value.value().empty()) {
        update[name] = std::nullopt;
      } else {
        update[name] = std::vector<std::string>(value.value().begin(), value.value().end());
      }
    }
    auto updated = tracer->Update(model, update);
    Audit(admission, "TraceSetting", updated.status());
    if (!updated.ok()) return Answer(c, GrpcEndpoint::kTraceSetting, updated.status());
    WEFT_LOG(Warning) << "trace settings" << (model.empty() ? std::string() : " of model '" + model + "'")
                      << " changed over gRPC";
    now = std::move(*updated);
  }
  for (const auto& [name, values] : now) {
    auto& out = (*r->mutable_settings())[name];
    for (const std::string& v : values) out.add_value(v);
  }
  return Answer(c, GrpcEndpoint::kTraceSetting, Status::Ok());
}

// Triton's logging extension: the settings a request names are applied (all or none); every answer holds all of
// them, so an empty request reads them.
GrpcInferenceService::Reactor* GrpcInferenceService::LogSettings(Context* c, const LogSettingsRequest* q,
                                                                 LogSettingsResponse* r) {
  Admission admission;
  if (Reactor* refused = Refuse(c, GrpcEndpoint::kLogSettings, Permission::kAdmin, {}, "LogSettings", &admission)) {
    return refused;
  }
  Result<weft::LogSettings> now = UpdateLogSettings([q](weft::LogSettings* settings) -> Status {
    for (const auto& [name, value] : q->settings()) {
      LogSettingValue converted;
      switch (value.parameter_choice_case()) {
        case LogSettingsRequest::SettingValue::kBoolParam: converted = value.bool_param(); break;
        case LogSettingsRequest::SettingValue::kUint32Param: converted = uint64_t{value.uint32_param()}; break;
        case LogSettingsRequest::SettingValue::kStringParam: converted = value.string_param(); break;
        default: return InvalidArgument("log setting '" + name + "' has no value");
      }
      WEFT_RETURN_IF_ERROR(ApplyLogSetting(name, converted, settings));
    }
    return Status::Ok();
  });
  if (!q->settings().empty()) Audit(admission, "LogSettings", now.status());
  if (!now.ok()) return Answer(c, GrpcEndpoint::kLogSettings, now.status());
  if (!q->settings().empty()) {
    WEFT_LOG(Warning) << "log settings changed over gRPC";
  }
  for (const auto& [name, value] : NamedLogSettings(*now)) {
    LogSettingsResponse::SettingValue& out = (*r->mutable_settings())[std::string(name)];
    if (const bool* flag = std::get_if<bool>(&value)) {
      out.set_bool_param(*flag);
    } else if (const uint64_t* number = std::get_if<uint64_t>(&value)) {
      out.set_uint32_param(static_cast<uint32_t>(*number));  // a verbose level: a uint32 in LogSettings
    } else {
      out.set_string_param(std::get<std::string>(value));
    }
  }
  return Answer(c, GrpcEndpoint::kLogSettings, Status::Ok());
}

}  // namespace weft
