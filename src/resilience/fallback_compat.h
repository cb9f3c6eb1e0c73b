#pragma once

#include "base/status.h"
#include "model/model_config.h"

namespace weft {

// Whether `fallback` may answer the requests of `primary`: OK when every request the primary accepts is one the
// fallback accepts, and the fallback's answer has every output the primary's clients get, in a shape they accept.
// Dims are compared as clients see them (reshape is the framework's business):
//
//   - batching: a primary that batches needs a fallback that batches at least as large a batch; a primary that does
//     not batch needs a fallback that does not either (the batch dimension is in the shape clients send);
//   - inputs: every primary input exists in the fallback with the same datatype, the same rank, and each fallback
//     dim -1 or equal to the primary's (so a primary -1 needs a fallback -1); every fallback input exists in the
//     primary (a config has no optional inputs);
//   - outputs: every primary output exists in the fallback with the same datatype, the same rank, and each
//     fallback dim equal to the primary's unless the primary's is -1 (an output is the other way round: the
//     fallback's must be one the primary's clients accept, so a fallback -1 needs a primary -1). Extra fallback
//     outputs are fine.
//
// InvalidArgument naming both models, the tensor and the difference otherwise, e.g. "fallback 'det_small' is not
// compatible with 'det': input 'images' is TYPE_FP16 there, TYPE_FP32 here". Both configs should have passed
// ValidateModelConfig. Pure; thread-compatible.
Status CheckFallbackCompatible(const ModelConfig& primary, const ModelConfig& fallback);

}  // namespace weft
