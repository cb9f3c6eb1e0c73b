#pragma once

#include <cstdint>
#include <string>

namespace weft {

// Triton's statistics extension for one model version (GET v2/models/{m}/versions/{v}/stats, gRPC
// ModelStatistics), as plain values. Durations are totals in nanoseconds with the number of requests they cover.
struct StatisticDuration {
  uint64_t count = 0;
  uint64_t ns = 0;
};

struct VersionStatistics {
  std::string model;
  int64_t version = 0;
  uint64_t inference_count = 0;  // batch items executed
  uint64_t execution_count = 0;
  StatisticDuration success;  // count and total duration (arrival to answer) of successful requests
  StatisticDuration fail;     // count of failed requests (their durations are not kept: ns is 0)
  // Per successful request, each with its batch's compute times, so that every count equals success.count.
  StatisticDuration queue;
  StatisticDuration compute_input;
  StatisticDuration compute_infer;
  StatisticDuration compute_output;
};

}  // namespace weft
