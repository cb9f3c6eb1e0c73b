#include "frontend/grpc/stream_infer.h"

#include <optional>
#include <vector>

#include "frontend/grpc/grpc_status.h"
#include "frontend/grpc/infer_message.h"
#include "frontend/grpc/peer_identity.h"

namespace weft {

namespace {

// Deadlines further away than this are treated as this far: the steady clock's nanoseconds overflow past ~292
// years, and a client may well send "year 9999".
constexpr auto kMaxCallTimeout = std::chrono::hours(24 * 365);

// Triton's streaming clients ask with the request parameter triton_enable_empty_final_response to be told which
// response is a request's last: its `triton_final_response` parameter is true. weft's models answer each request
// once (no decoupled models), so every answer is the last, and none needs to be an empty one of its own.
bool WantsFinalFlag(const inference::ModelInferRequest& message) {
  auto it = message.parameters().find("triton_enable_empty_final_response");
  return it != message.parameters().end() &&
         it->second.parameter_choice_case() == inference::InferParameter::kBoolParam && it->second.bool_param();
}

void MarkFinal(bool wanted, inference::ModelStreamInferResponse* response) {
  if (!wanted) return;
  (*response->mutable_infer_response()->mutable_parameters())["triton_final_response"].set_bool_param(true);
}

}  // namespace

void ApplyCallDeadline(gpr_timespec call_deadline, InferenceRequest* request) {
  if (call_deadline.clock_type == GPR_TIMESPAN ||
      gpr_time_cmp(call_deadline, gpr_inf_future(call_deadline.clock_type)) == 0) {
    return;
  }
  // In whole seconds and nanoseconds, clamped before any conversion: gRPC's own conversion to a time_point (the
  // call's deadline()) multiplies the seconds into nanoseconds and overflows for a deadline ~292 years out, which
  // clients that mean "no deadline" send (grpc-timeout: 2562047H).
  const gpr_timespec left = gpr_time_sub(call_deadline, gpr_now(call_deadline.clock_type));
  const int64_t max_seconds = std::chrono::duration_cast<std::chrono::seconds>(kMaxCallTimeout).count();
  const std::chrono::nanoseconds wait =
      left.tv_sec >= max_seconds    ? std::chrono::nanoseconds(kMaxCallTimeout)
      : left.tv_sec <= -max_seconds ? -std::chrono::nanoseconds(kMaxCallTimeout)
                                    : std::chrono::seconds(left.tv_sec) + std::chrono::nanoseconds(left.tv_nsec);
  const SteadyTime deadline = std::chrono::steady_clock::now() + wait;
  if (!request->deadline || deadline < *request->deadline) request->deadline = deadline;
}

void ApplyRouteKey(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, InferenceRequest* request) {
  auto it = metadata.find("weft-route-key");
  if (it == metadata.end()) return;
  request->parameters.try_emplace("weft_route_key", std::string(it->second.data(), it->second.size()));
}

namespace {

// The call's side of Caller. The subject and address are only looked up when they can matter: gRPC builds them
// as strings at each ask.
struct CallCaller {
  std::string authorization, client_subject, peer_address;
  CallCaller(const Gatekeeper& gatekeeper, const grpc::ServerContextBase& context) {
    const auto& metadata = context.client_metadata();
    if (auto it = metadata.find("authorization"); it != metadata.end()) {
      authorization.assign(it->second.data(), it->second.size());
    }
    if (gatekeeper.authenticates() && authorization.empty()) client_subject = ClientCertificateSubject(context);
    peer_address = PeerAddress(context);
  }
  Caller view() const {
    return Caller{.authorization = authorization, .client_subject = client_subject, .peer_address = peer_address};
  }
};

}  // namespace

Admission AdmitCall(const InferServices& services, const grpc::ServerContextBase& context, Permission permission,
                    std::string_view model, std::string_view method) {
  if (services.gatekeeper == nullptr || !services.gatekeeper->active()) return Admission{};
  CallCaller caller(*services.gatekeeper, context);
  return services.gatekeeper->Admit(caller.view(), permission, model, method);
}

Status AuthenticateCall(const InferServices& services, const grpc::ServerContextBase& context,
                        std::string_view method) {
  if (services.gatekeeper == nullptr || !services.gatekeeper->authenticates()) return Status::Ok();
  CallCaller caller(*services.gatekeeper, context);
  return services.gatekeeper->Authenticate(caller.view(), method);
}

void StartTrace(const InferServices& services, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                TraceProtocol protocol, SteadyTime arrival, InferenceRequest* request) {
  if (services.tracer == nullptr || !services.tracer->active()) return;
  auto value = [&](const char* key) {
    auto it = metadata.find(key);
    return it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
  };
  request->trace =
      services.tracer->MaybeStart(request->model_name, protocol, value("traceparent"), value("tracestate"), arrival);
  if (request->trace) request->trace->Stamp(TraceStage::kRequestStart);
}

void EncodeSoonAfter(const InferServices& services, const Result<InferenceResponse>& result,
                     std::function<void()> encode) {
  size_t bytes = 0;
  if (result.ok()) {
    for (const Tensor& t : result->outputs) bytes += t.byte_size();
  }
  if (bytes <= services.inline_encode_bytes || services.encoder == nullptr) {
    encode();
  } else {
    services.encoder->Post(std::move(encode));
  }
}

void StreamRegistry::Add(StreamInferReactor* stream) {
  std::lock_guard lock(mu_);
  streams_.insert(stream);
}

void StreamRegistry::Remove(StreamInferReactor* stream) {
  std::lock_guard lock(mu_);
  streams_.erase(stream);
}

void StreamRegistry::EndAll() {
  // Under mu_: a stream is deleted only after Remove, which waits for it.
  std::lock_guard lock(mu_);
  for (StreamInferReactor* stream : streams_) stream->EndWhenIdle();
}

StreamInferReactor::StreamInferReactor(grpc::CallbackServerContext* context, const InferServices& services)
    : context_(context), services_(services) {
  if (services_.streams) services_.streams->Add(this);
  reading_ = std::make_shared<inference::ModelInferRequest>();
  StartRead(reading_.get());
}

void StreamInferReactor::EndWhenIdle() {
  std::optional<grpc::Status> finish;
  {
    std::lock_guard lock(mu_);
    ending_ = true;
    finish = ShouldFinishLocked();
  }
  if (finish) Finish(*finish);
}

void StreamInferReactor::StartNextRead() {
  inference::ModelInferRequest* next;
  {
    std::lock_guard lock(mu_);
    reading_ = std::make_shared<inference::ModelInferRequest>();
    next = reading_.get();
  }
  StartRead(next);
}

void StreamInferReactor::OnReadDone(bool ok) {
  if (!ok) {  // the client half-closed, or the call is gone
    std::optional<grpc::Status> finish;
    {
      std::lock_guard lock(mu_);
      reads_done_ = true;
      finish = ShouldFinishLocked();
    }
    if (finish) Finish(*finish);
    return;
  }
  std::shared_ptr<const inference::ModelInferRequest> message;
  uint64_t seq;
  {
    std::lock_guard lock(mu_);
    // Finished by EndWhenIdle while this read came in: nothing may be submitted any more (OnDone may come first).
    if (finished_) return;
    message = std::move(reading_);
    seq = next_seq_++;
    in_engine_[seq] = nullptr;  // unanswered from now on: the call cannot finish before its answer
  }

  const bool final_flag = WantsFinalFlag(*message);
  const SteadyTime arrival = std::chrono::steady_clock::now();
  // Each request names its model, so each is admitted (scope and rate) on its own.
  Admission admission = AdmitCall(services_, *context_, Permission::kInfer, message->model_name(), "ModelStreamInfer");
  Result<DecodedModelInfer> decoded = admission.status.ok()
                                          ? DecodeModelInferRequest(message, arrival, services_.shared_memory)
                                          : Result<DecodedModelInfer>(admission.status);
  if (!decoded.ok()) {
    auto response = std::make_unique<Response>();
    response->set_error_message(decoded.status().message());
    response->mutable_infer_response()->set_model_name(message->model_name());
    response->mutable_infer_response()->set_model_version(message->model_version());
    response->mutable_infer_response()->set_id(message->id());
    MarkFinal(final_flag, response.get());
    services_.counters->Count(GrpcEndpoint::kStreamInfer, decoded.status().code());
    Answered(seq, std::move(response));
  } else {
    std::unique_ptr<InferenceRequest> request = std::move(decoded->request);
    ApplyCallDeadline(context_->raw_deadline(), request.get());
    ApplyRouteKey(context_->client_metadata(), request.get());
    StartTrace(services_, context_->client_metadata(), TraceProtocol::kGrpcStream, arrival, request.get());
    bool cancelled;
    {
      std::lock_guard lock(mu_);
      in_engine_[seq] = request->cancel;
      if (request->trace) traces_[seq] = request->trace;
      cancelled = cancelled_;
    }
    if (cancelled) request->cancel->Cancel();
    struct Pending {
      std::vector<std::string> requested;
      SharedMemoryOutputs shared_memory_outputs;
      std::vector<SharedMemorySlice> shared_memory_inputs;
      std::string model_name, model_version, id;
      bool final_flag = false;
    };
    auto pending = std::make_shared<Pending>(Pending{
        request->requested_outputs, std::move(decoded->shared_memory_outputs), std::move(decoded->shared_memory_inputs),
        message->model_name(), message->model_version(), message->id(), final_flag});
    std::shared_ptr<RequestTrace> trace = request->trace;
    services_.engine->Submit(std::move(request), [this, seq, pending, trace](Result<InferenceResponse> result) {
      EncodeSoonAfter(services_, result, [this, seq, pending, trace, result] {
        auto response = std::make_unique<Response>();
        Status status =
            result.ok() ? EncodeModelInferResponse(*result, pending->requested, pending->shared_memory_outputs,
                                                   pending->shared_memory_inputs, response->mutable_infer_response())
                        : result.status();
        if (!status.ok()) {
          response->Clear();
          response->set_error_message(status.message());
          response->mutable_infer_response()->set_model_name(pending->model_name);
          response->mutable_infer_response()->set_model_version(pending->model_version);
          response->mutable_infer_response()->set_id(pending->id);
        }
        MarkFinal(pending->final_flag, response.get());
        services_.counters->Count(GrpcEndpoint::kStreamInfer, status.code());
        if (trace) trace->Stamp(TraceStage::kSendStart);
        Answered(seq, std::move(response));
      });
    });
  }

  bool read_more;
  {
    std::lock_guard lock(mu_);
    // A call that is gone keeps reading, so that the failing read ends it. A stream the server is ending reads
    // nothing more: what it has read is answered, then it finishes (a client that kept sending would otherwise
    // keep it busy until the exit deadline).
    read_more = !finished_ &&
                (cancelled_ || write_failed_ || (!ending_ && next_seq_ - next_write_ < services_.max_stream_in_flight));
    read_paused_ = !read_more;
  }
  if (read_more) StartNextRead();
}

void StreamInferReactor::Answered(uint64_t seq, std::unique_ptr<Response> response) {
  Response* write = nullptr;
  std::optional<grpc::Status> finish;
  {
    std::lock_guard lock(mu_);
    in_engine_.erase(seq);
    if (!write_failed_) ready_[seq] = std::move(response);
    write = NextWriteLocked();
    finish = ShouldFinishLocked();
  }
  // Nothing below may touch members once Finish is called: OnDone may delete this at once. `write` and `finish`
  // never both hold (a write in progress keeps the call open).
  if (write) StartWrite(write);
  if (finish) Finish(*finish);
}

void StreamInferReactor::OnWriteDone(bool ok) {
  Response* write = nullptr;
  bool resume = false;
  std::optional<grpc::Status> finish;
  std::shared_ptr<RequestTrace> written;
  {
    std::lock_guard lock(mu_);
    writing_.reset();
    if (auto it = traces_.find(next_write_); it != traces_.end()) {
      written = std::move(it->second);
      traces_.erase(it);
    }
    ++next_write_;
    if (!ok) {  // the client is gone: nothing more will reach it
      write_failed_ = true;
      ready_.clear();
    }
    write = NextWriteLocked();
    // A paused read resumes when answers drain, and also when the client is gone, so that the failing read ends
    // the call.
    if (read_paused_ && !reads_done_ &&
        (write_failed_ || (!ending_ && next_seq_ - next_write_ < services_.max_stream_in_flight))) {
      read_paused_ = false;
      resume = true;
    }
    finish = ShouldFinishLocked();
  }
  if (written) written->End();
  if (resume) StartNextRead();
  if (write) StartWrite(write);
  if (finish) Finish(*finish);
}

void StreamInferReactor::OnCancel() {
  std::vector<std::shared_ptr<CancelToken>> tokens;
  bool resume;
  {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    for (auto& [seq, token] : in_engine_) {
      if (token) tokens.push_back(token);
    }
    resume = read_paused_ && !reads_done_;
    read_paused_ = false;
  }
  // Outside the lock: the engine may answer on this thread, which takes mu_ in Answered.
  for (auto& token : tokens) token->Cancel();
  if (resume) StartNextRead();
}

void StreamInferReactor::OnDone() {
  if (services_.streams) services_.streams->Remove(this);
  delete this;
}

StreamInferReactor::Response* StreamInferReactor::NextWriteLocked() {
  if (writing_ || write_failed_) return nullptr;
  auto it = ready_.find(next_write_);
  if (it == ready_.end()) return nullptr;
  writing_ = std::move(it->second);
  ready_.erase(it);
  return writing_.get();
}

std::optional<grpc::Status> StreamInferReactor::ShouldFinishLocked() {
  if (finished_ || !(reads_done_ || ending_) || !in_engine_.empty() || writing_) return std::nullopt;
  if (!write_failed_ && !ready_.empty()) return std::nullopt;
  finished_ = true;
  if (cancelled_) return grpc::Status::CANCELLED;
  if (!reads_done_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
  return grpc::Status::OK;
}

}  // namespace weft
