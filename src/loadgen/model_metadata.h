#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tensor/data_type.h"

namespace weft {

// A tensor as GET /v2/models/{m} describes it; -1 marks a variable dim (the batch dim among them).
struct TensorMetadata {
  std::string name;
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;
};

// The model metadata response of the Open Inference Protocol, the parts a load generator needs.
struct ModelMetadata {
  std::string name;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// Parses a model metadata response body. InvalidArgument names what is missing or malformed.
Result<ModelMetadata> ParseModelMetadata(std::string_view json);

// The max_batch_size of a model configuration response body (the model_configuration extension). The field is
// absent when 0 (protobuf's JSON leaves defaults out). InvalidArgument when the body is not a JSON object.
Result<int64_t> ParseMaxBatchSize(std::string_view json);

}  // namespace weft
