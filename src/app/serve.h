#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace weft {

struct ServeOptions {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  uint16_t http_port = 8000;
  uint16_t grpc_port = 8001;
  uint16_t metrics_port = 8002;
  bool triton_metrics = true;               // Triton's nv_* families on /metrics beside weft's own
  std::vector<std::string> metrics_config;  // Triton's --metrics-config settings (metrics/metrics_config.h)
  bool allow_gpu_metrics = true;            // Triton's nv_gpu_* families from NVML, where a driver is
  int metrics_interval_ms = 2000;           // how often the GPU families are read, as Triton's flag
  std::vector<std::string> trace_config;    // Triton's --trace-config settings (trace/trace_settings.h)
  int http_threads = 2;
  size_t max_request_body_bytes = 64ull << 20;
  // Requests queued per model version; 0 = unbounded; the default (Engine::Options::kDefaultQueueBound) is 16
  // full batches per instance, at least 64, for models whose config bounds no queue (README, "Limits").
  size_t max_queue_per_model = static_cast<size_t>(-1);
  size_t max_queued_bytes = 1ull << 30;
  // The system shared memory extension over HTTP and gRPC: clients may register POSIX shared memory objects and
  // name them in requests. Off by default: a region is memory that another process can rewrite at any time.
  bool allow_shared_memory = false;
  // Regions registered at once over both protocols; each holds a descriptor and a mapping.
  size_t max_shared_memory_regions = 1024;
  // Regions may only name objects whose name starts with this (without the leading '/'); empty = any.
  std::string shared_memory_prefix;
  // Regions may only name objects owned by one of these uids; empty = any owner.
  std::vector<uint32_t> shared_memory_owner_uids;

  // Security (docs/security.md): authentication is on when a key file or a JWKS is given.
  std::string auth_keys;              // --auth-keys: the API key file, read again when it changes
  std::string auth_jwks;              // --auth-jwks: the JSON Web Key Set that JWTs are checked against
  std::string auth_jwt_issuer;        // --auth-jwt-issuer: the `iss` a JWT must carry (empty: any)
  std::string auth_jwt_audience;      // --auth-jwt-audience: an `aud` a JWT must carry (empty: any)
  int auth_jwt_clock_skew_secs = 60;  // allowed on a JWT's exp and nbf
  bool auth_protect_health = false;   // the health checks need a credential too
  std::string rate_limit;             // --rate-limit RATE[:BURST]: the default bucket of every caller; empty = none
  std::string tls_cert;               // --tls-cert: PEM certificate chain of the HTTP, gRPC and metrics ports
  std::string tls_key;                // --tls-key: its private key
  std::string tls_client_ca;          // --tls-client-ca: CAs of client certificates (mTLS)
  std::string tls_client_auth = "required";  // --tls-client-auth: required or optional, with --tls-client-ca

  // Where batches run (docs/architecture.md, "Device layer"): "auto" (CUDA when a GPU is found, else the CPU
  // device, with a log line), "cpu" or "cuda".
  std::string device = "auto";
  int cpu_workers = 0;  // threads of the CPU device; 0 = one per hardware thread (at least 2)
  // CUDA: a thread polls the end events of the high class instead of host functions (CudaDeviceOptions).
  bool poll_high_completions = false;
  int streams_per_class = 2;      // streams per priority class on the device
  bool stream_priorities = true;  // device stream priorities by class
  bool load_balance = true;       // move instances between streams of their class by measured load
  int best_effort_inflight = 1;   // batches in flight per best-effort instance; 0 = no bound
  // Best-effort batches in flight over the device; -1 = the device's default (CPU: workers - 1, so that urgent work
  // always finds a free worker; CUDA: no bound); 0 = no bound.
  int best_effort_budget = -1;

  // The live repository (README "Model control"; docs/architecture.md "Live repository").
  std::string model_control_mode = "none";  // none, poll, explicit, watch (Triton's --model-control-mode, + watch)
  int repository_poll_secs = 15;            // poll mode's rescan interval (Triton's default); watch mode's fallback
  double repository_settle_secs = 1.0;      // watch and poll: quiet time before a changed directory loads
  std::vector<std::string> load_models;     // explicit mode: --load-model, repeatable; "*" = every model
  bool require_checksums = false;           // refuse versions without SHA256SUMS
  bool strict_readiness = true;             // Triton's --strict-readiness
  int model_load_threads = 4;               // Triton's --model-load-thread-count

  // Limits and shutdown (README "Limits and shutdown"; docs/architecture.md "Edges: connections, descriptors,
  // shutdown").
  // HTTP connections open at once on the inference port; a new one past it is accepted and closed at once.
  // 0 = derived from the descriptor limit: the limit less a reserve (a quarter of it, at most 256), kept for gRPC, the
  // metrics port and the rest of the process.
  size_t max_connections = 0;
  // Bytes of HTTP responses being written, over all connections; an answer that would go past it gets 429.
  // 0 = no bound.
  size_t max_unsent_response_bytes = 1ull << 30;
  // After SIGTERM or SIGINT: seconds of serving as usual with readiness false, so that load balancers take the
  // server out before it stops accepting.
  int drain_delay_secs = 0;
  // Seconds from the signal to exit, the drain delay included: requests still unanswered then get an error, and
  // the process exits even if an execution has not returned (Triton's --exit-timeout-secs).
  int exit_timeout_secs = 30;
};

// Loads the repository, serves until SIGINT or SIGTERM, then drains and stops (docs/architecture.md, "Edges").
// Returns the process exit code: 0 after a stop within the exit timeout, 1 when the repository cannot be read, the
// device cannot be opened or a port cannot be bound. Does not return when the stop outlasts the exit timeout
// (exit status 1) or a second signal comes (exit status 128 + the signal).
// The startup log line names the bound ports ("serving HTTP on ...:P, gRPC on port G, metrics on port M"), so that
// a caller that asked for port 0 learns which one it got.
int RunServe(const ServeOptions& options);

}  // namespace weft
