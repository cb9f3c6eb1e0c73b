#pragma once

#include <span>
#include <string>

#include "base/result.h"
#include "rollout/rollout_report.h"
#include "rollout/rollout_spec.h"

namespace weft {

// The JSON of the rollout routes (docs/rollouts.md). Pure functions. Thread-safe.

// POST v2/models/{m}/rollout:
//   {"candidate": 2,
//    "stages": [{"kind": "shadow" | "canary", "share": 0.05, "min_requests": 100, "min_duration_ms": 10000}, ...],
//    "criteria": {"max_error_rate_increase", "max_p99_ratio", "max_divergence_rate", "abs_tolerance",
//                 "rel_tolerance", "min_top1_agreement"},
//    "sticky_key": "camera_id", "shadow_max_in_flight": 4, "on_rollback": "keep" | "unload"}
// "candidate" (an integer >= 1) is required, and so are each stage's "kind" and "share"; every other field takes
// RolloutSpec's default (DefaultRolloutStages() for "stages"). The result has passed ValidateRolloutSpec.
// InvalidArgument naming the field for: an empty body or one that is not a JSON object, a key that is unknown (so
// that a misspelt one is never ignored) or given twice, a value of the wrong type, an integer out of range, a number
// of magnitude above 1e9 (no criterion means anything there; see rollout_codec.cc), more than
// RolloutLimits::kMaxStages stages, and whatever ValidateRolloutSpec rejects.
Result<RolloutSpec> DecodeRolloutRequest(std::span<const std::byte> body);

// The request's JSON shape with every field written: DecodeRolloutRequest gives `spec` back for any spec it
// returned.
std::string EncodeRolloutSpec(const RolloutSpec& spec);

// GET v2/models/{m}/rollout:
//   {"model", "state", "automatic", "primary", "candidate", "stage" (0-based), "spec": {as EncodeRolloutSpec},
//    "figures": {figures}, "started", "ended" (left out while in progress),
//    "decisions": [{"time", "stage", "action", "reason", "figures": {figures}}, ...]}
// where {figures} is
//   {"elapsed_ms",
//    "primary": {"requests", "errors", "error_rate", "p50_ms", "p99_ms"}, "candidate": {the same},
//    "divergence": {"compared", "diverged", "divergence_rate", "max_abs", "max_rel", "top1_rows", "top1_agreement"},
//    "noise": {"compared", "max_abs", "max_rel"}, "shadow": {"sent", "dropped"}}.
// Non-finite figures are written as the strings "NaN", "Infinity" and "-Infinity" (JsonWriter::Double).
std::string EncodeRolloutReport(const RolloutReport& report);

}  // namespace weft
