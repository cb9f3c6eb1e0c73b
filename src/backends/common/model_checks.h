#pragma once

#include <span>
#include <string>

#include "base/result.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace weft {

// The shape the framework expects for `tensor`: the batch dimension (-1) first when the model batches, then
// `reshape` if set, else `dims`. -1 matches any size.
Shape FrameworkShape(const ModelConfig& config, const TensorConfig& tensor);

// Checks a batch against the config before it reaches a framework, so that a wrong request becomes an
// InvalidArgument that names the tensor instead of an exception (or a crash) deep inside the framework: one
// tensor per configured input, the configured type, CPU memory, a shape that matches FrameworkShape and a byte
// size that matches the shape. The engine checks requests too; backends check again because they are the last
// line before code that reads raw memory.
Status CheckInputs(const ModelConfig& config, std::span<const Tensor> inputs);

// Checks what a framework returned for output `tensor` against the config (a model and config that disagree):
// the configured datatype, a shape that matches FrameworkShape, and a first dimension of `batch_size` when the
// model batches. Errors are Internal and name the output: the request was fine, the model or config is wrong.
Status CheckOutput(const ModelConfig& config, const TensorConfig& tensor, DataType type, const Shape& shape,
                   int64_t batch_size);

// The largest value NonNegativeIntParameter takes: 2^40 (12.7 days in microseconds), so that a delay times a batch
// size (at most 2^20, ConfigLimits) stays within int64.
inline constexpr int64_t kMaxIntParameter = int64_t{1} << 40;

// Parses a config parameter that must be an integer from 0 to kMaxIntParameter; `fallback` when absent.
Result<int64_t> NonNegativeIntParameter(const ModelConfig& config, const std::string& key, int64_t fallback);

}  // namespace weft
