#include <simdjson.h>

#include <cstring>
#include <string>

#include "frontend/http/float16.h"
#include "frontend/http/infer_codec.h"
#include "frontend/http/json_writer.h"

namespace weft {

namespace {

template <typename T>
T Load(const std::byte* data, size_t index) {
  T value;
  std::memcpy(&value, data + index * sizeof(T), sizeof(T));  // outputs need not be aligned
  return value;
}

Status WriteData(const Tensor& tensor, JsonWriter* json) {
  const std::byte* data = tensor.data();
  size_t count = static_cast<size_t>(tensor.element_count());
  json->BeginArray();
  switch (tensor.type()) {
    case DataType::kBool:
      for (size_t i = 0; i < count; ++i) json->Bool(Load<uint8_t>(data, i) != 0);
      break;
    case DataType::kUint8:
      for (size_t i = 0; i < count; ++i) json->Uint(Load<uint8_t>(data, i));
      break;
    case DataType::kUint16:
      for (size_t i = 0; i < count; ++i) json->Uint(Load<uint16_t>(data, i));
      break;
    case DataType::kUint32:
      for (size_t i = 0; i < count; ++i) json->Uint(Load<uint32_t>(data, i));
      break;
    case DataType::kUint64:
      for (size_t i = 0; i < count; ++i) json->Uint(Load<uint64_t>(data, i));
      break;
    case DataType::kInt8:
      for (size_t i = 0; i < count; ++i) json->Int(Load<int8_t>(data, i));
      break;
    case DataType::kInt16:
      for (size_t i = 0; i < count; ++i) json->Int(Load<int16_t>(data, i));
      break;
    case DataType::kInt32:
      for (size_t i = 0; i < count; ++i) json->Int(Load<int32_t>(data, i));
      break;
    case DataType::kInt64:
      for (size_t i = 0; i < count; ++i) json->Int(Load<int64_t>(data, i));
      break;
    case DataType::kFp16:
      for (size_t i = 0; i < count; ++i) json->Float(HalfToFloat(Load<uint16_t>(data, i)));
      break;
    case DataType::kBf16:
      for (size_t i = 0; i < count; ++i) json->Float(Bfloat16ToFloat(Load<uint16_t>(data, i)));
      break;
    case DataType::kFp32:
      for (size_t i = 0; i < count; ++i) json->Float(Load<float>(data, i));
      break;
    case DataType::kFp64:
      for (size_t i = 0; i < count; ++i) json->Double(Load<double>(data, i));
      break;
    case DataType::kBytes:
      for (std::string_view element : SplitBytesElements(tensor.bytes())) {
        if (!simdjson::validate_utf8(element.data(), element.size())) {
          return InvalidArgument("output '" + tensor.name() +
                                 "' holds bytes that are not UTF-8, which JSON cannot carry; request it with the "
                                 "binary_data parameter");
        }
        json->String(element);
      }
      break;
    case DataType::kInvalid: return Internal("output '" + tensor.name() + "' has no datatype");
  }
  json->EndArray();
  return Status::Ok();
}

Status WriteOutput(const Tensor& tensor, bool binary, JsonWriter* json) {
  if (tensor.place().kind == MemoryKind::kGpu) {
    return Internal("output '" + tensor.name() + "' is in GPU memory; the backend must return host memory");
  }
  Status valid = ValidateTensorBytes(tensor.type(), tensor.shape(), tensor.bytes());
  if (!valid.ok()) return Internal(valid.WithContext("output '" + tensor.name() + "'").message());
  json->BeginObject();
  json->Key("name");
  json->String(tensor.name());
  json->Key("datatype");
  json->String(DataTypeName(tensor.type()));
  json->Key("shape");
  json->BeginArray();
  for (int64_t d : tensor.shape()) json->Int(d);
  json->EndArray();
  if (binary) {
    json->Key("parameters");
    json->BeginObject();
    json->Key("binary_data_size");
    json->Uint(tensor.byte_size());
    json->EndObject();
  } else {
    json->Key("data");
    WEFT_RETURN_IF_ERROR(WriteData(tensor, json));
  }
  json->EndObject();
  return Status::Ok();
}

// An output placed in shared memory: written there, listed without data and without parameters, as Triton lists it
// (NVIDIA's C++ client reads an output with parameters as one in the binary tensor data extension, and then requires
// "binary_data_size").
Status WriteSharedMemoryOutputJson(const Tensor& tensor, const SharedMemorySlice& slice, JsonWriter* json) {
  Status valid = ValidateTensorBytes(tensor.type(), tensor.shape(), tensor.bytes());
  if (!valid.ok()) return Internal(valid.WithContext("output '" + tensor.name() + "'").message());
  WEFT_RETURN_IF_ERROR(WriteSharedMemoryOutput(tensor, slice));
  json->BeginObject();
  json->Key("name");
  json->String(tensor.name());
  json->Key("datatype");
  json->String(DataTypeName(tensor.type()));
  json->Key("shape");
  json->BeginArray();
  for (int64_t d : tensor.shape()) json->Int(d);
  json->EndArray();
  json->EndObject();
  return Status::Ok();
}

const Tensor* FindOutput(const InferenceResponse& response, const std::string& name) {
  for (const Tensor& t : response.outputs) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

}  // namespace

Result<EncodedInferResponse> EncodeInferResponse(const InferenceResponse& response, const OutputFormat& format) {
  std::vector<const Tensor*> outputs;
  if (format.requested.empty()) {
    for (const Tensor& t : response.outputs) outputs.push_back(&t);
  } else {
    for (const std::string& name : format.requested) {
      const Tensor* t = FindOutput(response, name);
      if (!t) return Internal("the response lacks the requested output '" + name + "'");
      outputs.push_back(t);
    }
  }

  EncodedInferResponse encoded;
  size_t json_bytes = 256;
  for (const Tensor* t : outputs) {
    bool elsewhere = format.IsBinary(t->name()) || format.shared_memory.count(t->name());
    json_bytes += 128 + (elsewhere ? 0 : t->byte_size() * 3);
  }
  encoded.json.reserve(json_bytes);
  JsonWriter json(&encoded.json);
  json.BeginObject();
  json.Key("model_name");
  json.String(response.model_name);
  json.Key("model_version");
  json.String(std::to_string(response.model_version));
  if (!response.id.empty()) {
    json.Key("id");
    json.String(response.id);
  }
  if (!response.parameters.empty()) {
    json.Key("parameters");
    json.BeginObject();
    for (const auto& [key, value] : response.parameters) {
      json.Key(key);
      json.String(value);
    }
    json.EndObject();
  }
  json.Key("outputs");
  json.BeginArray();
  for (const Tensor* t : outputs) {
    auto shm = format.shared_memory.find(t->name());
    if (shm != format.shared_memory.end()) {
      WEFT_RETURN_IF_ERROR(WriteSharedMemoryOutputJson(*t, shm->second, &json));
      continue;
    }
    bool binary = format.IsBinary(t->name());
    WEFT_RETURN_IF_ERROR(WriteOutput(*t, binary, &json));
    if (binary) encoded.binary.push_back(*t);
  }
  json.EndArray();
  json.EndObject();
  // After the outputs are written: a truncation during the writes must fail the request too.
  WEFT_RETURN_IF_ERROR(CheckSharedMemoryIntact(format.shared_memory_inputs, format.shared_memory));
  return encoded;
}

}  // namespace weft
