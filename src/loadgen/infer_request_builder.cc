#include "loadgen/infer_request_builder.h"

#include <simdjson.h>

#include <bit>
#include <variant>

#include "loadgen/json_text.h"

namespace weft {

namespace {

uint64_t ReadLittleEndian(const char* p, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return value;
}

void AppendParameters(const InferRequestOptions& options, std::string* out) {
  bool any = options.binary || options.priority || options.timeout_us || !options.parameters.empty();
  if (!any) return;
  out->append(",\"parameters\":{");
  bool first = true;
  auto key = [&](std::string_view name) {
    if (!first) out->push_back(',');
    first = false;
    AppendJsonString(out, name);
    out->push_back(':');
  };
  if (options.binary) {
    key("binary_data_output");
    out->append("true");
  }
  if (options.priority) {
    key("priority");
    JsonNumber(*options.priority, out);
  }
  if (options.timeout_us) {
    key("timeout");
    JsonNumber(*options.timeout_us, out);
  }
  for (const auto& [name, value] : options.parameters) {
    key(name);
    if (const int64_t* number = std::get_if<int64_t>(&value)) {
      JsonNumber(*number, out);
    } else {
      AppendJsonString(out, std::get<std::string>(value));
    }
  }
  out->push_back('}');
}

void AppendPlacement(const SharedMemoryPlacement& p, std::string* out) {
  out->append(",\"parameters\":{\"shared_memory_region\":");
  AppendJsonString(out, p.region);
  out->append(",\"shared_memory_offset\":");
  JsonNumber(p.offset, out);
  out->append(",\"shared_memory_byte_size\":");
  JsonNumber(p.byte_size, out);
  out->push_back('}');
}

}  // namespace

std::string ModelPath(std::string_view base_path, std::string_view model, std::string_view version) {
  std::string path = std::string(base_path) + "/v2/models/" + std::string(model);
  if (!version.empty()) path += "/versions/" + std::string(version);
  return path;
}

void AppendJsonTensorData(const GeneratedInput& input, std::string* out) {
  out->push_back('[');
  const char* p = input.data.data();
  const char* end = p + input.data.size();
  size_t size = DataTypeSize(input.datatype);
  for (bool first = true; p < end; first = false) {
    if (!first) out->push_back(',');
    switch (input.datatype) {
      case DataType::kBool: out->append(*p ? "true" : "false"); break;
      case DataType::kUint8:
      case DataType::kUint16:
      case DataType::kUint32:
      case DataType::kUint64: JsonNumber(ReadLittleEndian(p, size), out); break;
      case DataType::kInt8: JsonNumber(static_cast<int8_t>(ReadLittleEndian(p, 1)), out); break;
      case DataType::kInt16: JsonNumber(static_cast<int16_t>(ReadLittleEndian(p, 2)), out); break;
      case DataType::kInt32: JsonNumber(static_cast<int32_t>(ReadLittleEndian(p, 4)), out); break;
      case DataType::kInt64: JsonNumber(static_cast<int64_t>(ReadLittleEndian(p, 8)), out); break;
      case DataType::kFp16: JsonNumber(HalfBitsToFloat(static_cast<uint16_t>(ReadLittleEndian(p, 2))), out); break;
      case DataType::kBf16:
        JsonNumber(std::bit_cast<float>(static_cast<uint32_t>(ReadLittleEndian(p, 2) << 16)), out);
        break;
      case DataType::kFp32: JsonNumber(std::bit_cast<float>(static_cast<uint32_t>(ReadLittleEndian(p, 4))), out); break;
      case DataType::kFp64: JsonNumber(std::bit_cast<double>(ReadLittleEndian(p, 8)), out); break;
      case DataType::kBytes: {
        size = 4 + ReadLittleEndian(p, 4);
        AppendJsonString(out, std::string_view(p + 4, size - 4));
        break;
      }
      case DataType::kInvalid: return;
    }
    p += size;
  }
  out->push_back(']');
}

PreparedRequest BuildInferRequest(std::string_view model_path, const std::vector<GeneratedInput>& inputs,
                                  const InferRequestOptions& options) {
  PreparedRequest request;
  request.target = std::string(model_path) + "/infer";
  std::string& body = request.body;
  body.append("{\"inputs\":[");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GeneratedInput& input = inputs[i];
    if (i) body.push_back(',');
    body.append("{\"name\":");
    AppendJsonString(&body, input.name);
    body.append(",\"shape\":[");
    for (size_t d = 0; d < input.shape.size(); ++d) {
      if (d) body.push_back(',');
      JsonNumber(input.shape[d], &body);
    }
    body.append("],\"datatype\":");
    AppendJsonString(&body, DataTypeName(input.datatype));
    if (auto shm = options.shared_memory_inputs.find(input.name); shm != options.shared_memory_inputs.end()) {
      AppendPlacement(shm->second, &body);
      body.push_back('}');
    } else if (options.binary) {
      body.append(",\"parameters\":{\"binary_data_size\":");
      JsonNumber(input.data.size(), &body);
      body.append("}}");
    } else {
      body.append(",\"data\":");
      AppendJsonTensorData(input, &body);
      body.push_back('}');
    }
  }
  body.push_back(']');
  if (!options.shared_memory_outputs.empty()) {
    body.append(",\"outputs\":[");
    bool first = true;
    for (const auto& [name, placement] : options.shared_memory_outputs) {
      if (!first) body.push_back(',');
      first = false;
      body.append("{\"name\":");
      AppendJsonString(&body, name);
      AppendPlacement(placement, &body);
      body.push_back('}');
    }
    body.push_back(']');
  }
  AppendParameters(options, &body);
  body.push_back('}');

  if (options.binary) {
    size_t header_bytes = body.size();
    for (const GeneratedInput& input : inputs) {
      if (!options.shared_memory_inputs.contains(input.name)) body.append(input.data);
    }
    request.headers.emplace_back("Content-Type", "application/octet-stream");
    request.headers.emplace_back("Inference-Header-Content-Length", std::to_string(header_bytes));
  } else {
    request.headers.emplace_back("Content-Type", "application/json");
  }
  return request;
}

Result<PreparedRequest> RawInferRequest(std::string_view model_path, std::string body) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(body.data(), body.size()).get(root)) {
    return InvalidArgument(std::string("the input data is not JSON: ") + simdjson::error_message(error));
  }
  if (root.type() != simdjson::dom::element_type::OBJECT) {
    return InvalidArgument("the input data is not a JSON object (a complete inference request body)");
  }
  PreparedRequest request;
  request.target = std::string(model_path) + "/infer";
  request.headers.emplace_back("Content-Type", "application/json");
  request.body = std::move(body);
  return request;
}

}  // namespace weft
