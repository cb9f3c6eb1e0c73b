#pragma once

#include <string_view>

#include "base/result.h"
#include "model/model_config.h"
#include "model/request.h"

namespace weft {

// The models that the request targets decode against, as a server that loaded them from config.pbtxt holds them:
// each is parsed and validated once, on first use. Together they cover every datatype, batching and not,
// variable dims, reshape (to a scalar too) and BYTES. Names: "identity" (FP32 [-1]), "identity_bytes" (BYTES
// [-1]), "add_sub" (2 x FP32 [16], batching), "image" (UINT8 [3,-1,-1], batching), "reshaped" (INT64 [1] -> [],
// FP16 [2,-1] -> [-1], batching), "scalar" (BOOL [1] -> []) and "every_type" (one input of each datatype, [-1],
// batching). Thread-safe.
const ModelConfig* FindFixedModel(std::string_view name);

// What the engine and an identity backend do with a decoded request for `model`: PrepareInputs against the
// config, then a response whose outputs are the prepared inputs under the names of the config's outputs (the
// fixed models' outputs mirror their inputs), checked by FinishOutputs. The response for the frontend to encode,
// or the first error.
Result<InferenceResponse> ServeAsIdentity(const ModelConfig& model, const InferenceRequest& request);

}  // namespace weft
