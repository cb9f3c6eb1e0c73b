#pragma once

#include <string>

#include "base/status.h"
#include "engine/engine.h"
#include "grpc_service.pb.h"
#include "metrics/metrics.h"

namespace weft {

// The read-only RPCs about models, answered from the engine (and the metrics registry for statistics). Each
// fills its response or returns the error the call finishes with. Thread-safe; none blocks on inference.

// NotFound for an unknown model or version; the metadata of a model that failed to load is still served.
Status FillModelMetadata(const Engine& engine, const inference::ModelMetadataRequest& request,
                         inference::ModelMetadataResponse* response);

// ModelConfig::json (Triton's JSON rendering of config.pbtxt) parsed into the protobuf ModelConfig; a config
// built in code, without JSON, is rendered from its fields.
Status FillModelConfig(const Engine& engine, const inference::ModelConfigRequest& request,
                       inference::ModelConfigResponse* response);

// Triton's statistics extension, from Engine::Statistics: inference and execution counts, successes and their
// durations, failures, and per successful request the queue and compute (input, infer, output) times. Not kept:
// last_inference, failure durations, batch_stats, cache figures (zero or empty; docs/triton_compatibility.md).
// NotFound for an unknown model or version, Unavailable for one that is not ready.
Status FillModelStatistics(const Engine& engine, const inference::ModelStatisticsRequest& request,
                           inference::ModelStatisticsResponse* response);

}  // namespace weft
