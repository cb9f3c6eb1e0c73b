#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/status.h"
#include "trace/span.h"
#include "trace/trace_settings.h"

namespace weft {

class MetricsRegistry;

// The moments of one request that a trace records, Triton's timestamps (docs/user_guide/trace.md) plus the start
// of the device's run, in the order a request passes them.
enum class TraceStage : uint8_t {
  kRecvStart,           // HTTP_RECV_START / GRPC_WAITREAD_END: the request's header arrived
  kRecvEnd,             // HTTP_RECV_END: its body too
  kRequestStart,        // REQUEST_START: decoded and handed to the engine
  kQueueStart,          // QUEUE_START: in its version's queue
  kComputeStart,        // COMPUTE_START: its batch was taken from the queue and gathers its inputs
  kComputeInputEnd,     // COMPUTE_INPUT_END
  kInferStart,          // the device began the batch (later than the inputs when the stream was busy)
  kComputeOutputStart,  // COMPUTE_OUTPUT_START: the device finished the batch
  kComputeEnd,          // COMPUTE_END: this request's outputs are cut from the batch's
  kRequestEnd,          // REQUEST_END: the engine answered
  kSendStart,           // HTTP_SEND_START / GRPC_SEND_START: the response is encoded
  kSendEnd,             // HTTP_SEND_END / GRPC_SEND_END: written
  kCount
};
inline constexpr size_t kTraceStageCount = static_cast<size_t>(TraceStage::kCount);

// Where the request came in: an HTTP request, a ModelInfer call, or one request of a ModelStreamInfer stream.
enum class TraceProtocol : uint8_t { kHttp, kGrpc, kGrpcStream };

// Whether a request is traced: a pure function of its settings and where the counters stand.
struct SamplingInput {
  bool timestamps = false;     // the level is TIMESTAMPS
  uint64_t rate = 0;           // one in `rate`; 0 = none by rate
  bool parent_based = true;    // the caller's sampled flag decides when there is one
  std::optional<bool> caller;  // the caller's sampled flag, when it sent a valid traceparent
  uint64_t sequence = 0;       // this request's number among those the rate applies to, from 1
  int64_t remaining = -1;      // traces left under trace_count; -1 = no limit
};
bool ShouldTrace(const SamplingInput& in);

class TracerCore;

// The trace of one sampled request. Made by Tracer::MaybeStart; the request carries it (InferenceRequest::trace) and
// every stage stamps it. End() turns it into spans (OpenTelemetry mode) or a JSON record (Triton mode) and hands them
// to the exporter off the request path. Thread-safe: stages are stamped from the threads the request passes through.
class RequestTrace {
 public:
  RequestTrace(std::shared_ptr<TracerCore> core, TraceProtocol protocol, std::string model, TraceId trace_id,
               SpanId parent, std::string trace_state, SteadyTime arrival);
  ~RequestTrace();  // ends the trace if End() was not called (a response that was never written)
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;

  void Stamp(TraceStage stage, SteadyTime at = std::chrono::steady_clock::now()) {
    stamps_[static_cast<size_t>(stage)].store(at.time_since_epoch().count(), std::memory_order_relaxed);
  }
  std::optional<SteadyTime> stamp(TraceStage stage) const;

  // The version that answered (a fallback's when a fallback did), and the request's id and priority.
  void SetModel(std::string_view model, int64_t version);
  void SetRequest(std::string_view id, uint32_t priority);
  // The answer's outcome: an error marks the server and model spans.
  void SetOutcome(const Status& status);
  // The batch execution the request joined: its compute span links to the batch's span.
  void JoinBatch(const TraceId& batch_trace, const SpanId& batch_span, int64_t batch_items);
  // A span made elsewhere for this trace's exporter (the scheduler's batch span).
  void Export(SpanData span) const;

  const TraceId& trace_id() const { return trace_id_; }
  // `at` on the system clock, in ns since the Unix epoch, as spans carry it.
  uint64_t WallNs(SteadyTime at) const;
  const SpanId& server_span_id() const { return server_span_; }

  // Stamps kSendEnd (when not stamped) and hands the trace over. Only the first call counts.
  void End();

 private:
  const std::shared_ptr<TracerCore> core_;
  const TraceProtocol protocol_;
  const TraceId trace_id_;
  const SpanId parent_;  // the caller's span; all zero when the trace starts here
  const SpanId server_span_;
  const std::string trace_state_;
  const uint64_t wall_at_arrival_ns_;  // system clock at `arrival`: spans carry wall time, stages steady time
  std::array<std::atomic<SteadyTime::rep>, kTraceStageCount> stamps_{};
  std::atomic<bool> ended_{false};
  mutable std::mutex mu_;
  std::string model_;                    // guarded by mu_
  int64_t version_ = 0;                  // guarded by mu_
  std::string request_id_;               // guarded by mu_
  uint32_t priority_ = 0;                // guarded by mu_
  Status outcome_;                       // guarded by mu_
  std::optional<SpanData::Link> batch_;  // guarded by mu_
  int64_t batch_items_ = 0;              // guarded by mu_
};

// Samples requests and sends their traces where the settings say. One per server; the frontends call MaybeStart
// for every inference request, so that call is cheap: with tracing off it reads one atomic flag and returns null,
// without allocating or locking. Thread-safe.
class Tracer {
 public:
  // `metrics` (may be null) gets weft_trace_* counters; it must outlive the tracer.
  Tracer(TraceSettings settings, MetricsRegistry* metrics);
  ~Tracer();  // writes what is pending: the Triton file closed, the OTLP queue sent (bounded)
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Whether any request may be traced now (some level is TIMESTAMPS). One atomic load: the frontends ask it before
  // they look up a request's trace headers, so that an untraced server does not.
  bool active() const;

  // A new trace for a request to `model`, or null when it is not sampled. `traceparent`/`tracestate` are the
  // caller's W3C headers (empty when absent): a valid one keeps the caller's trace id and parents the server span.
  std::shared_ptr<RequestTrace> MaybeStart(std::string_view model, TraceProtocol protocol, std::string_view traceparent,
                                           std::string_view tracestate, SteadyTime arrival);

  // The settings API (Triton's trace extension). `model` empty = the server's settings. Answers the settings in
  // force after the update, by their API names.
  Result<std::map<std::string, std::vector<std::string>>> Update(const std::string& model,
                                                                 const TraceSettingUpdate& update);
  std::map<std::string, std::vector<std::string>> View(const std::string& model) const;
  TraceSettings settings() const;

 private:
  const std::shared_ptr<TracerCore> core_;
};

}  // namespace weft
