#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

struct ServeOptions {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  uint16_t http_port = 8000;
  uint16_t grpc_port = 8001;
  uint16_t metrics_port = 8002;
  int http_threads = 2;
  size_t max_request_body_bytes = 64ull << 20;
  size_t max_queue_per_model = 0;
  size_t max_queued_bytes = 1ull << 30;
  // The system shared memory extension over HTTP and gRPC: clients may register POSIX shared memory objects and
  // name them in requests. Off by default: a region is memory that another process can rewrite at any time.
  bool allow_shared_memory = false;
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
};

// Loads the repository, serves until SIGINT or SIGTERM, then drains and stops. Returns the process exit code:
// 0 after a clean stop, 1 when the repository cannot be read, the device cannot be opened or a port cannot be bound.
// The startup log line names the bound ports ("serving HTTP on ...:P, gRPC on port G, metrics on port M"), so that
// a caller that asked for port 0 learns which one it got.
int RunServe(const ServeOptions& options);

}  // namespace weft
