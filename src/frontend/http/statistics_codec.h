#pragma once

#include <span>
#include <string>

#include "model/statistics.h"

namespace weft {

// The body of GET v2/models[/{m}[/versions/{v}]]/stats in Triton's JSON shape: {"model_stats": [{"name",
// "version" (a string), "last_inference", "inference_count", "execution_count", "inference_stats": {"success",
// "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"}, each
// {"count", "ns"} as numbers, "batch_stats": [], "memory_usage": []}, ...]}. What weft does not keep is written as
// zero or empty, so that clients that read every member find them. Pure. Thread-safe.
std::string EncodeModelStatistics(std::span<const VersionStatistics> stats);

}  // namespace weft
