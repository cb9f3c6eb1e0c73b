#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "frontend/http/testing/http_test_client.h"
#include "tensor/tensor.h"

namespace weft::testing {

// Request bodies, response parsing and reference data for the KServe v2 integration tests.

// {"name":..., "datatype":..., "shape":[...], "data": <data_json>}
std::string JsonInput(std::string_view name, std::string_view datatype, const Shape& shape, std::string_view data_json);
// {"name":..., "datatype":..., "shape":[...], "parameters":{"binary_data_size": n}}
std::string BinaryInput(std::string_view name, std::string_view datatype, const Shape& shape, size_t size);
// {"inputs":[...], <extra>} where `extra` is more members ("\"id\":\"x\"") or empty.
std::string InferJson(const std::vector<std::string>& inputs, std::string_view extra = {});
// FP32 values as a JSON array.
std::string FloatArray(std::span<const float> values);

// A body of the binary tensor data extension and its header.
struct BinaryBody {
  std::string body;
  HeaderList headers;  // Inference-Header-Content-Length, Content-Type
};
BinaryBody MakeBinaryBody(const std::string& json, const std::vector<std::string_view>& blobs);

using JsonScalar = std::variant<bool, int64_t, uint64_t, double, std::string>;

struct ParsedOutput {
  std::string name;
  std::string datatype;
  Shape shape;
  std::vector<JsonScalar> data;  // from JSON `data`
  bool binary = false;
  std::string bytes;                  // from the binary section
  std::vector<float> Floats() const;  // FP32 from either form
};

struct ParsedInferResponse {
  std::string error;  // why parsing failed, empty otherwise
  std::string model_name;
  std::string model_version;
  std::string id;
  bool has_id = false;
  std::vector<ParsedOutput> outputs;
  const ParsedOutput* Find(std::string_view name) const;
};

// Parses an inference response, JSON or binary (Inference-Header-Content-Length).
ParsedInferResponse ParseInferResponse(const TestResponse& response);

// The "error" member of an error body, or the body itself when it is not one.
std::string ErrorMessage(const TestResponse& response);

// examples/reference/<model>/: a tensor's raw bytes and its shape from meta.json.
struct ReferenceTensor {
  std::string name;
  std::string datatype;
  Shape shape;
  std::string bytes;
  std::vector<float> Floats() const;
};
struct Reference {
  std::string error;
  std::vector<ReferenceTensor> inputs;
  std::vector<ReferenceTensor> outputs;
  const ReferenceTensor* Output(std::string_view name) const;
};
Reference ReadReference(const std::string& model);

// The largest |a[i] - b[i]|; infinity when the sizes differ.
float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace weft::testing
