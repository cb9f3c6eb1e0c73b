#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"
#include "model/request.h"

namespace weft {

// Checks a request's inputs and requested outputs against the model's config and returns the inputs in config
// order, reshaped to what the framework expects (zero-copy). Errors are InvalidArgument and name the tensor.
// Pure: no state, no clock.
Result<std::vector<Tensor>> PrepareInputs(const ModelConfig& config, const InferenceRequest& request);

// The labels of a version's outputs, by output name (LoadedVersion::labels).
using OutputLabels = std::map<std::string, std::vector<std::string>>;

// Turns a backend's outputs (framework shapes) into the protocol's view: API shapes (the config's dims behind
// the batch dim), only the requested outputs, in the order asked for (config order when none was asked for), and
// the outputs the request classifies as their top classes with `labels`. Internal if the backend broke its contract
// (a missing output, a wrong datatype or element count).
Result<std::vector<Tensor>> FinishOutputs(const ModelConfig& config, const OutputLabels& labels,
                                          const InferenceRequest& request, std::vector<Tensor> outputs,
                                          int64_t batch_size);

}  // namespace weft
