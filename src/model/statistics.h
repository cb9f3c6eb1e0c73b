#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// Triton's statistics extension for one model version (GET v2/models/{m}/versions/{v}/stats, gRPC
// ModelStatistics), as plain values. Durations are totals in nanoseconds with the number of requests they cover.
struct StatisticDuration {
  uint64_t count = 0;
  uint64_t ns = 0;

  friend bool operator==(const StatisticDuration&, const StatisticDuration&) = default;
};

// The executions of one batch size (Triton's InferBatchStatistics): each duration counts executions, not requests.
struct BatchStatistics {
  uint64_t batch_size = 0;
  StatisticDuration compute_input;
  StatisticDuration compute_infer;
  StatisticDuration compute_output;

  friend bool operator==(const BatchStatistics&, const BatchStatistics&) = default;
};

struct VersionStatistics {
  std::string model;
  int64_t version = 0;
  uint64_t inference_count = 0;  // batch items executed
  uint64_t execution_count = 0;
  StatisticDuration success;  // count and total duration (arrival to answer) of successful requests
  StatisticDuration fail;     // count and total duration (arrival to answer) of failed requests
  // Per successful request, each with its batch's compute times, so that every count equals success.count.
  StatisticDuration queue;
  StatisticDuration compute_input;
  StatisticDuration compute_infer;
  StatisticDuration compute_output;
  uint64_t last_inference_ms = 0;  // when the last request was answered, ms since the Unix epoch; 0 = never
  // One entry per batch size executed successfully, ascending; empty for a version that never ran one.
  std::vector<BatchStatistics> batch_stats;
};

}  // namespace weft
