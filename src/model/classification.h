#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/result.h"
#include "tensor/tensor.h"

namespace weft {

// Triton's classification extension: a client that asks for an output with `classification: k` gets, instead of
// the output's values, its k largest as BYTES elements "<value>:<index>" or "<value>:<index>:<label>", largest first
// (ties: the lower index first). The label is line <index> of the output's label_filename, when it has one and the
// line exists. A batching model gets them per batch entry: shape [batch, min(k, classes)]; otherwise
// [min(k, classes)], where classes is the element count of one entry. Values are printed as C++'s std::to_string
// prints the output's own type (Triton's format: "0.750000" for floats, "3" for integers).

// Whether an output of `type` can be classified: the integer types and FP32/FP64, as in Triton.
bool IsClassifiable(DataType type);

// The top `class_count` (> 0) classes of `output` (host memory, a classifiable type), named as `output`.
// `batched`: the first dimension is the batch. InvalidArgument for an output that cannot be classified (its type,
// a batch dimension with no entries' worth of classes).
Result<Tensor> Classify(const Tensor& output, uint32_t class_count, bool batched,
                        const std::vector<std::string>& labels);

// The labels of a label file, one per line (a trailing '\r' removed). Files over kMaxLabelFileBytes or of more than
// kMaxLabels lines, and what is not a regular file, are refused (InvalidArgument), as are missing and unreadable
// ones (NotFound, Internal); errors name the file.
inline constexpr size_t kMaxLabelFileBytes = size_t{64} << 20;
inline constexpr size_t kMaxLabels = size_t{1} << 20;
Result<std::vector<std::string>> ReadLabelFile(const std::filesystem::path& file);

}  // namespace weft
