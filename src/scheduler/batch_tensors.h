#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace weft {

// Moving tensors in and out of a batch: the inputs of several requests are joined along the batch dimension
// (dim 0) into one buffer per input, and each output of the execution is split back into one view per request.
// Pure functions of their arguments.

// The key under which requests may share an execution (QueuedRequest::batch_key): the datatype, memory place
// and non-batch dims of every input. nullopt for inputs that must run alone: a tensor without a batch
// dimension, or one outside CPU memory (joining copies on the host).
std::optional<std::string> BatchKeyOf(const std::vector<Tensor>& inputs);

// Joins the inputs of requests that share a batch key, input by input, along dim 0. One request's inputs come
// back as they are (no copy); several are copied into one new buffer per input, in the order given.
std::vector<Tensor> JoinInputs(std::span<const std::vector<Tensor>* const> requests);

// Splits each output along dim 0 into `batch_sizes.size()` parts of the given sizes, in order. Each part is a
// view into the output's bytes (same owner, no copy); BYTES outputs are split at element boundaries.
// Internal when an output's dim 0 is not the sum of the batch sizes or its bytes do not divide evenly.
Result<std::vector<std::vector<Tensor>>> SplitOutputs(const std::vector<Tensor>& outputs,
                                                      std::span<const int64_t> batch_sizes);

}  // namespace weft
