#pragma once

#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_set>

#include "auth/gatekeeper.h"
#include "engine/engine.h"
#include "frontend/grpc/request_counters.h"
#include "frontend/grpc/work_queue.h"
#include "frontend/shm/shared_memory.h"
#include "grpc_service.pb.h"

namespace weft {

class StreamInferReactor;

// The ModelStreamInfer calls open now, so that a stop can end them: a stream its client keeps open would hold the
// stop until its deadline. Thread-safe.
class StreamRegistry {
 public:
  void Add(StreamInferReactor* stream);
  void Remove(StreamInferReactor* stream);  // from the stream's OnDone, before it is deleted
  // Every open stream finishes (UNAVAILABLE) as soon as it has answered what it has read.
  void EndAll();

 private:
  std::mutex mu_;
  std::unordered_set<StreamInferReactor*> streams_;  // guarded by mu_
};

// What the inference calls use; everything outlives every call (the server stops before they go away).
struct InferServices {
  Engine* engine = nullptr;
  const SharedMemoryRegistry* shared_memory = nullptr;  // null: the extension is off
  GrpcRequestCounters* counters = nullptr;
  WorkQueue* encoder = nullptr;  // builds responses bigger than inline_encode_bytes
  size_t inline_encode_bytes = 0;
  size_t max_stream_in_flight = 0;    // requests read from one stream and not yet answered
  StreamRegistry* streams = nullptr;  // null: streams are not tracked
  Tracer* tracer = nullptr;           // null: nothing is traced, and TraceSetting answers UNIMPLEMENTED
  Gatekeeper* gatekeeper = nullptr;   // null: every caller is served (docs/security.md)
};

// Whether the call may use an RPC that needs `permission` (on `model` for kInfer), by its `authorization`
// metadata, its client certificate and its peer (services.gatekeeper; admitted when there is none). `method`
// names the RPC in the audit log.
Admission AdmitCall(const InferServices& services, const grpc::ServerContextBase& context, Permission permission,
                    std::string_view model, std::string_view method);
// Only the call's credential (Gatekeeper::Authenticate): for a stream, whose requests are admitted one by one.
Status AuthenticateCall(const InferServices& services, const grpc::ServerContextBase& context, std::string_view method);

// Sets the request's deadline from the call's (ServerContextBase::raw_deadline()): the earlier of the two wins. An
// infinite gRPC deadline leaves it as it is; one more than a year away counts as a year.
void ApplyCallDeadline(gpr_timespec call_deadline, InferenceRequest* request);

// A rollout's stickiness by metadata: `weft-route-key` becomes the request parameter `weft_route_key` (unless the
// request sets it), as HTTP's header of that name does.
void ApplyRouteKey(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, InferenceRequest* request);

// Samples the request for tracing (services.tracer, when set) under the call's W3C context (`traceparent` and
// `tracestate` metadata), and stamps its hand-off to the engine. A stream's requests share their call's context.
void StartTrace(const InferServices& services, const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
                TraceProtocol protocol, SteadyTime arrival, InferenceRequest* request);

// Runs `encode` now when the outputs are small, else on the encoder's threads, so that the engine's thread that
// delivered the result goes back to inference at once.
void EncodeSoonAfter(const InferServices& services, const Result<InferenceResponse>& result,
                     std::function<void()> encode);

// One ModelStreamInfer call: requests are read one after another and submitted as they arrive; responses are
// written in the order of their requests, one write at a time. An error (a malformed request, an engine error)
// becomes a response whose error_message says why, and the stream stays open. Reading pauses while
// max_stream_in_flight requests are unanswered, so a client that does not read cannot make the server buffer
// without bound. A cancelled call cancels every request it still has in the engine. Finishes OK after the
// client's last request has been answered, or UNAVAILABLE after EndWhenIdle once what was read has been answered
// (a request read after that is dropped: the status tells the client). Deletes itself when gRPC is done with it
// (OnDone), which happens only after every engine callback has returned.
class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  StreamInferReactor(grpc::CallbackServerContext* context, const InferServices& services);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  // The server stops: finish once nothing read is left unanswered.
  void EndWhenIdle();

 private:
  using Response = inference::ModelStreamInferResponse;

  // The engine's answer (or a decoding error) for request `seq`; may run on any thread.
  void Answered(uint64_t seq, std::unique_ptr<Response> response);
  // Under mu_: the next write to start, if any (moved into writing_).
  Response* NextWriteLocked();
  // Under mu_: the status to finish the call with when it can finish now (and marks it finished).
  std::optional<grpc::Status> ShouldFinishLocked();
  void StartNextRead();

  grpc::CallbackServerContext* const context_;
  const InferServices services_;

  std::mutex mu_;
  std::shared_ptr<inference::ModelInferRequest> reading_;  // the message being read; touched by gRPC's reactions
  uint64_t next_seq_ = 0;                                  // guarded by mu_; the next request's number
  uint64_t next_write_ = 0;                                // guarded by mu_; the response to write next
  std::map<uint64_t, std::unique_ptr<Response>> ready_;    // guarded by mu_; answered, waiting for their turn
  std::unique_ptr<Response> writing_;                      // guarded by mu_; the write in progress
  // guarded by mu_: the traces of sampled requests by sequence number, ended once their answer is written
  std::map<uint64_t, std::shared_ptr<RequestTrace>> traces_;
  std::map<uint64_t, std::shared_ptr<CancelToken>> in_engine_;  // guarded by mu_
  bool reads_done_ = false;                                     // guarded by mu_
  bool read_paused_ = false;                                    // guarded by mu_; too many unanswered requests
  bool write_failed_ = false;                                   // guarded by mu_; the client is gone
  bool cancelled_ = false;                                      // guarded by mu_
  bool finished_ = false;                                       // guarded by mu_
  bool ending_ = false;                                         // guarded by mu_; EndWhenIdle was called
};

}  // namespace weft
