#pragma once

#include <filesystem>
#include <string>

#include "base/result.h"
#include "tensor/tensor.h"

namespace weft::examples {

// The repository root: $WEFT_SOURCE_DIR (weft_test sets it), else the current directory.
std::filesystem::path SourceDir();

// examples/models/<model>/<version>: where a model's file is, for Backend::CreateInstance.
std::filesystem::path VersionDir(const std::string& model, int version = 1);

// examples/reference/<model>/<kind>.<name>.bin (kind: "input" or "output") as a tensor named `name`. The file's
// size must match `type` and `shape`. NotFound says how to generate the files.
Result<Tensor> ReadReference(const std::string& model, const std::string& kind, const std::string& name, DataType type,
                             Shape shape);

// The largest |a[i] - b[i]| of two FP32 tensors; infinity if their shapes differ.
float MaxAbsDiff(const Tensor& a, const Tensor& b);

}  // namespace weft::examples
