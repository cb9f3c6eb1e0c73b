#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft {

struct ServeOptions {
  std::string model_repository;
  std::string http_address = "0.0.0.0";
  uint16_t http_port = 8000;
  uint16_t metrics_port = 8002;
  int http_threads = 2;
  size_t max_request_body_bytes = 64ull << 20;
  size_t max_queue_per_model = 0;
  size_t max_queued_bytes = 1ull << 30;
};

// Loads the repository, serves until SIGINT or SIGTERM, then drains and stops. Returns the process exit code:
// 0 after a clean stop, 1 when the repository cannot be read or a port cannot be bound.
int RunServe(const ServeOptions& options);

}  // namespace weft
