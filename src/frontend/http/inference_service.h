#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <string>

#include "auth/gatekeeper.h"
#include "engine/engine.h"
#include "frontend/http/http_server.h"
#include "frontend/shm/shared_memory.h"
#include "lifecycle/live_repository.h"
#include "metrics/metrics.h"

namespace weft {

// The KServe v2 (Open Inference Protocol) HTTP routes on top of the engine:
//   GET  /v2/health/live, /v2/health/ready, /v2 (server metadata)
//   GET  /v2/models/{m}[/versions/{v}]            model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready      200, or the error that keeps it from serving
//   GET  /v2/models/{m}[/versions/{v}]/config     the model configuration as JSON
//   POST /v2/models/{m}[/versions/{v}]/infer      JSON and the binary tensor data extension
//   GET  /v2/systemsharedmemory[/region/{r}]/status, POST /v2/systemsharedmemory/region/{r}/register,
//   POST /v2/systemsharedmemory[/region/{r}]/unregister   the system shared memory extension, when it is on
//   POST /v2/repository/index, POST /v2/repository/models/{m}/load, .../unload   the model repository extension
// Errors are {"error": "..."} with the status from HttpStatusFor. Requests run on the engine; this handler never
// blocks an I/O thread on inference, and the response is encoded on the I/O thread. Thread-safe.
class InferenceService : public HttpHandler {
 public:
  struct Options {
    std::string server_name = "weft";
    std::string server_version;  // empty = this build's version
    // The system shared memory extension: the registry of regions (shared with the gRPC frontend), or null
    // when it is off. Must outlive the service.
    SharedMemoryRegistry* shared_memory = nullptr;
    // The model repository extension: the live repository that the index, load and unload routes use, or null
    // (they answer 501). Must outlive the service and every load it started.
    LiveRepository* repository = nullptr;
    // The most an inference request body compressed with gzip or deflate may inflate to (413 past it); the HTTP
    // server's own body limit bounds only the compressed bytes.
    size_t max_inflated_body_bytes = size_t{64} << 20;
    // Request tracing (Triton's trace extension, OpenTelemetry): samples inference requests, and answers the
    // trace setting routes. Null: nothing is traced and those routes answer 501. Must outlive the service.
    Tracer* tracer = nullptr;
    // Authentication, scopes and rate limits (docs/security.md); null or inactive: every caller is served. Must
    // outlive the service.
    Gatekeeper* gatekeeper = nullptr;
  };

  // `engine` and `metrics` must outlive the service and every request it started.
  InferenceService(Engine* engine, MetricsRegistry* metrics);
  InferenceService(Engine* engine, MetricsRegistry* metrics, Options options);

  void Handle(HttpRequest request, HttpResponder responder) override;
  // The server is shutting down: GET /v2/health/ready answers 503 from now on, while /v2/health/live and every
  // other route go on serving. Thread-safe; idempotent.
  void BeginDraining() { draining_.store(true, std::memory_order_relaxed); }

  // What a request is counted under in weft_http_requests_total and weft_requests_total{protocol="http"}.
  enum class Endpoint {
    kHealth,
    kServerMetadata,
    kModelMetadata,
    kModelReady,
    kModelConfig,
    kInfer,
    kSharedMemory,
    kRepository,
    kRollout,
    kStatistics,
    kLogging,
    kTrace,
    kUnknown
  };
  static constexpr size_t kEndpointCount = 13;

  // The counters of one endpoint, one per status class (2xx, 4xx, 5xx), in both families: weft_http_requests_total
  // (kept for the dashboards that read it) and weft_requests_total{protocol="http"} (shared with gRPC).
  struct ResponseCounters {
    std::array<Counter*, 3> http{};
    std::array<Counter*, 3> all{};
    // Learns the status of the answer too: the audit line of an admin action. Empty on every other route.
    std::function<void(unsigned http_status)> on_answer;
    void Count(unsigned http_status) const;
  };

 private:
  // `cuda`: the CUDA routes rather than the system ones.
  void HandleSharedMemory(const HttpRequest& request, bool cuda, const std::string& action, const std::string& region,
                          const ResponseCounters& counters, const HttpResponder& responder);
  // `action`: "index", "load" or "unload" (of `model`).
  void HandleRollout(const HttpRequest& request, const std::string& model, const ResponseCounters& counters,
                     const HttpResponder& responder);
  void HandleRepository(const HttpRequest& request, const std::string& action, const std::string& model,
                        const ResponseCounters& counters, const HttpResponder& responder);
  void HandleLogging(const HttpRequest& request, const ResponseCounters& counters, const HttpResponder& responder);
  // `model` empty: the server's trace settings.
  void HandleTraceSetting(const HttpRequest& request, const std::string& model, const ResponseCounters& counters,
                          const HttpResponder& responder);

  // Fetched once: counting takes no lock.
  using EndpointCounters = std::array<ResponseCounters, kEndpointCount>;

  Engine* const engine_;
  const Options options_;
  EndpointCounters counters_{};
  std::atomic<bool> draining_{false};
};

}  // namespace weft
