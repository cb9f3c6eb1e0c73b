#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <string_view>

#include "base/status.h"
#include "metrics/metrics.h"

namespace weft {

// What a call is counted under in weft_requests_total{protocol="grpc", endpoint, code}. The endpoint names are
// the HTTP frontend's where the operation is the same, so that one query covers both protocols.
enum class GrpcEndpoint {
  kHealth,  // ServerLive, ServerReady, grpc.health.v1.Health
  kServerMetadata,
  kModelMetadata,
  kModelReady,
  kModelConfig,
  kModelStatistics,
  kRepository,    // RepositoryIndex, RepositoryModelLoad, RepositoryModelUnload
  kSharedMemory,  // the system shared memory RPCs
  kInfer,         // ModelInfer
  kStreamInfer,   // one count per response on ModelStreamInfer
  kLogSettings,
  kTraceSetting,
  kUnimplemented,  // RPCs that weft declares but does not offer
};

// Counters by endpoint and outcome. A series is created the first time it is counted (so the exposition lists
// only what happened); after that, counting takes no lock. Thread-safe.
class GrpcRequestCounters {
 public:
  explicit GrpcRequestCounters(MetricsRegistry* metrics) : metrics_(metrics) {}

  void Count(GrpcEndpoint endpoint, StatusCode code);

 private:
  static constexpr size_t kEndpoints = static_cast<size_t>(GrpcEndpoint::kUnimplemented) + 1;
  static constexpr size_t kCodes = kStatusCodeCount;

  MetricsRegistry* const metrics_;
  std::array<std::array<std::atomic<Counter*>, kCodes>, kEndpoints> counters_{};
};

}  // namespace weft
