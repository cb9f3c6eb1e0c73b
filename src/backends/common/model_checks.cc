#include "backends/common/model_checks.h"

#include <charconv>
#include <string>

namespace weft {

Shape FrameworkShape(const ModelConfig& config, const TensorConfig& tensor) {
  Shape shape;
  if (config.max_batch_size > 0) shape.push_back(-1);
  const Shape& dims = tensor.reshape ? *tensor.reshape : tensor.dims;
  shape.insert(shape.end(), dims.begin(), dims.end());
  return shape;
}

namespace {
bool ShapeMatches(const Shape& expected, const Shape& actual) {
  if (expected.size() != actual.size()) return false;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (actual[i] < 0 || (expected[i] >= 0 && expected[i] != actual[i])) return false;
  }
  return true;
}
}  // namespace

Status CheckInputs(const ModelConfig& config, std::span<const Tensor> inputs) {
  if (inputs.size() != config.inputs.size()) {
    return InvalidArgument("model '" + config.name + "' expects " + std::to_string(config.inputs.size()) +
                           " inputs, got " + std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorConfig& want = config.inputs[i];
    const Tensor& got = inputs[i];
    if (got.type() != want.data_type) {
      return InvalidArgument("input '" + want.name + "' must be " + std::string(DataTypeName(want.data_type)) +
                             ", got " + std::string(DataTypeName(got.type())));
    }
    if (got.place().kind == MemoryKind::kGpu) {
      return InvalidArgument("input '" + want.name + "' is in GPU memory; this backend reads CPU memory only");
    }
    Shape expected = FrameworkShape(config, want);
    if (!ShapeMatches(expected, got.shape())) {
      return InvalidArgument("input '" + want.name + "' has shape " + ShapeToString(got.shape()) +
                             ", the model expects " + ShapeToString(expected));
    }
    WEFT_RETURN_IF_ERROR(
        ValidateTensorBytes(got.type(), got.shape(), got.bytes()).WithContext("input '" + want.name + "'"));
  }
  return Status::Ok();
}

Status CheckOutput(const ModelConfig& config, const TensorConfig& tensor, DataType type, const Shape& shape,
                   int64_t batch_size) {
  if (type != tensor.data_type) {
    return Internal("output '" + tensor.name + "': the model produced " + std::string(DataTypeName(type)) +
                    ", the config declares " + std::string(DataTypeName(tensor.data_type)));
  }
  Shape expected = FrameworkShape(config, tensor);
  if (config.max_batch_size > 0) expected[0] = batch_size;
  if (!ShapeMatches(expected, shape)) {
    return Internal("output '" + tensor.name + "': the model produced shape " + ShapeToString(shape) +
                    ", the config expects " + ShapeToString(expected));
  }
  return Status::Ok();
}

Result<int64_t> NonNegativeIntParameter(const ModelConfig& config, const std::string& key, int64_t fallback) {
  auto it = config.parameters.find(key);
  if (it == config.parameters.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0 || value > kMaxIntParameter) {
    return InvalidArgument("parameters '" + key + "': expected an integer from 0 to " +
                           std::to_string(kMaxIntParameter) + ", got '" + text + "'");
  }
  return value;
}

}  // namespace weft
