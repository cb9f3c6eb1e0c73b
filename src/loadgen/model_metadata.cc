#include "loadgen/model_metadata.h"

#include <simdjson.h>

namespace weft {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

Result<element> ParseObject(simdjson::dom::parser& parser, std::string_view json, std::string_view what) {
  element root;
  if (auto error = parser.parse(json.data(), json.size()).get(root)) {
    return InvalidArgument(std::string(what) + " is not JSON: " + simdjson::error_message(error));
  }
  if (root.type() != element_type::OBJECT) return InvalidArgument(std::string(what) + " is not a JSON object");
  return root;
}

Result<TensorMetadata> ParseTensor(element tensor, std::string_view where) {
  TensorMetadata out;
  std::string_view name, datatype;
  if (tensor["name"].get(name)) return InvalidArgument(std::string(where) + " has no string 'name'");
  out.name = std::string(name);
  std::string context = std::string(where) + " '" + out.name + "'";
  if (tensor["datatype"].get(datatype)) return InvalidArgument(context + " has no string 'datatype'");
  std::optional<DataType> type = DataTypeFromName(datatype);
  if (!type) return InvalidArgument(context + " has an unknown datatype '" + std::string(datatype) + "'");
  out.datatype = *type;
  simdjson::dom::array shape;
  if (tensor["shape"].get(shape)) return InvalidArgument(context + " has no 'shape' array");
  for (element dim : shape) {
    int64_t d = 0;
    if (dim.get(d) || d < -1) return InvalidArgument(context + ": shape dims must be integers >= -1");
    out.shape.push_back(d);
  }
  return out;
}

Result<std::vector<TensorMetadata>> ParseTensors(element root, const char* key, std::string_view where) {
  std::vector<TensorMetadata> tensors;
  simdjson::dom::array array;
  if (root[key].get(array)) {
    return InvalidArgument(std::string("model metadata has no '") + key + "' array");
  }
  for (element tensor : array) {
    if (tensor.type() != element_type::OBJECT) return InvalidArgument(std::string(where) + " is not an object");
    WEFT_ASSIGN_OR_RETURN(TensorMetadata t, ParseTensor(tensor, where));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

}  // namespace

Result<ModelMetadata> ParseModelMetadata(std::string_view json) {
  simdjson::dom::parser parser;
  WEFT_ASSIGN_OR_RETURN(element root, ParseObject(parser, json, "model metadata"));
  ModelMetadata metadata;
  std::string_view name;
  if (!root["name"].get(name)) metadata.name = std::string(name);
  WEFT_ASSIGN_OR_RETURN(metadata.inputs, ParseTensors(root, "inputs", "input"));
  // Outputs are informational here: a model whose metadata lists none can still be loaded.
  if (root["outputs"].error() == simdjson::SUCCESS) {
    WEFT_ASSIGN_OR_RETURN(metadata.outputs, ParseTensors(root, "outputs", "output"));
  }
  return metadata;
}

Result<int64_t> ParseMaxBatchSize(std::string_view json) {
  simdjson::dom::parser parser;
  WEFT_ASSIGN_OR_RETURN(element root, ParseObject(parser, json, "model configuration"));
  element value;
  if (root["max_batch_size"].get(value)) return int64_t{0};
  int64_t max_batch_size = 0;
  if (value.get(max_batch_size) || max_batch_size < 0) {
    return InvalidArgument("model configuration: max_batch_size must be a non-negative integer");
  }
  return max_batch_size;
}

}  // namespace weft
