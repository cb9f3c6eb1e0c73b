#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "metrics/metrics.h"

namespace weft {

// Triton's --metrics-config <setting>=<value> flags, the ones weft has:
//   summary_latencies=true|false   latency summaries of the nv_* durations (off by default, as in Triton)
//   summary_quantiles=<q>:<e>,...  their quantiles, e.g. "0.5:0.05,0.9:0.01"; the error <e> is accepted and unused,
//                                  since weft's summaries have a fixed resolution (Summary in metrics.h)
// The latency summaries to make (nullopt: none). InvalidArgument, naming the setting, for an unknown setting or a
// malformed value.
Result<std::optional<Summary::Options>> ParseMetricsConfig(const std::vector<std::string>& settings);

}  // namespace weft
