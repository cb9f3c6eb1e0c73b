#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "loadgen/model_metadata.h"
#include "tensor/data_type.h"

namespace weft {

// One generated input: a concrete shape and its data in the binary tensor data layout (little-endian, row-major,
// no padding; BOOL one byte 0/1; each BYTES element a 4-byte little-endian length and its bytes). The JSON form is
// rendered from these bytes, so both encodings carry the same values.
struct GeneratedInput {
  std::string name;
  DataType datatype = DataType::kInvalid;
  std::vector<int64_t> shape;
  std::string data;

  int64_t element_count() const;
};

struct InputGenerationOptions {
  int64_t batch_size = 1;
  // Input name -> its dims without the batch dim (a model that does not batch: all of its dims).
  std::map<std::string, std::vector<int64_t>> shapes;
  // From the model configuration; nullopt when the server does not serve it, and then a model batches when every
  // input's shape starts with -1 (how the protocol shows a batch dim).
  std::optional<int64_t> max_batch_size;
  int64_t string_length = 16;
  uint64_t seed = 1;
};

// The concrete shape of every input, in metadata order. For a model that batches, the first dim is the batch
// size and the others come from `shapes` or the metadata; otherwise all dims do and the batch size must be 1.
// InvalidArgument when a variable dim is left, a given shape contradicts a fixed dim or has the wrong rank, a
// shape names no input, or the batch size exceeds max_batch_size.
Result<std::vector<std::vector<int64_t>>> ResolveInputShapes(const ModelMetadata& metadata,
                                                             const InputGenerationOptions& options);

// Deterministic pseudo-random data for every input, fixed by the seed: FP32/FP64 uniform in [-1, 1]; FP16 and
// BF16 on a grid that both represent exactly (k/1024, k/128); integers in [0, 100), which stays valid as an
// index into small tables; BOOL 0 or 1; BYTES elements of string_length characters from [a-z0-9].
// InvalidArgument when shapes do not resolve or the inputs together would exceed 2 GiB.
Result<std::vector<GeneratedInput>> GenerateInputs(const ModelMetadata& metadata,
                                                   const InputGenerationOptions& options);

// The float value of IEEE binary16 bits (exact, every value including subnormals).
float HalfBitsToFloat(uint16_t bits);

}  // namespace weft
