#include "frontend/grpc/infer_message.h"

#include <charconv>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

namespace weft {

namespace {

using google::protobuf::Map;
using google::protobuf::RepeatedField;
using google::protobuf::RepeatedPtrField;
using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using ParameterMap = Map<std::string, InferParameter>;

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// A non-negative integer parameter (int64_param or uint64_param), or nullopt.
std::optional<uint64_t> AsUnsigned(const InferParameter& p) {
  if (p.parameter_choice_case() == InferParameter::kUint64Param) return p.uint64_param();
  if (p.parameter_choice_case() == InferParameter::kInt64Param && p.int64_param() >= 0) {
    return static_cast<uint64_t>(p.int64_param());
  }
  return std::nullopt;
}

bool IsSharedMemoryParameter(const std::string& key) { return key.starts_with("shared_memory_"); }

// A tensor's shared memory parameters, or nullopt when it names no region.
Result<std::optional<SharedMemoryRef>> SharedMemoryRefOf(const ParameterMap& parameters, const std::string& where,
                                                         const SharedMemoryRegistry* registry) {
  bool any = false;
  for (const auto& [key, value] : parameters) any = any || IsSharedMemoryParameter(key);
  if (!any) return std::optional<SharedMemoryRef>();
  if (registry == nullptr) {
    return Unimplemented(where + ": shared memory is not enabled on this server (weft serve --allow-shared-memory)");
  }
  SharedMemoryRef ref;
  auto region = parameters.find("shared_memory_region");
  if (region == parameters.end() || region->second.parameter_choice_case() != InferParameter::kStringParam ||
      region->second.string_param().empty()) {
    return InvalidArgument(where + ": 'shared_memory_region' must be a region name");
  }
  ref.region = region->second.string_param();
  auto size = parameters.find("shared_memory_byte_size");
  std::optional<uint64_t> byte_size = size == parameters.end() ? std::nullopt : AsUnsigned(size->second);
  if (!byte_size) return InvalidArgument(where + ": 'shared_memory_byte_size' must be a non-negative integer");
  ref.byte_size = *byte_size;
  auto offset = parameters.find("shared_memory_offset");
  if (offset != parameters.end()) {
    std::optional<uint64_t> value = AsUnsigned(offset->second);
    if (!value) return InvalidArgument(where + ": 'shared_memory_offset' must be a non-negative integer");
    ref.offset = *value;
  }
  for (const auto& [key, value] : parameters) {
    if (IsSharedMemoryParameter(key) && key != "shared_memory_region" && key != "shared_memory_byte_size" &&
        key != "shared_memory_offset") {
      return InvalidArgument(where + ": unknown parameter " + Quoted(key));
    }
  }
  return std::optional<SharedMemoryRef>(std::move(ref));
}

size_t TypedCount(const InferTensorContents& c) {
  return static_cast<size_t>(c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() +
                             c.uint_contents_size() + c.uint64_contents_size() + c.fp32_contents_size() +
                             c.fp64_contents_size() + c.bytes_contents_size());
}

Status CountError(const std::string& field, int have, int64_t need, const Shape& shape) {
  return InvalidArgument("'" + field + "' has " + std::to_string(have) + " elements, shape " + ShapeToString(shape) +
                         " needs " + std::to_string(need));
}

// Elements of a repeated wire field converted to T, each range-checked.
template <typename T, typename Wire>
Result<Tensor> FromRepeated(const RepeatedField<Wire>& values, const std::string& field, const std::string& name,
                            DataType type, const Shape& shape) {
  int64_t count = ElementCount(shape);
  if (values.size() != count) return CountError(field, values.size(), count, shape);
  std::byte* dst = nullptr;
  Tensor tensor = Tensor::Allocate(name, type, shape, &dst);
  for (int i = 0; i < values.size(); ++i) {
    Wire v = values.Get(i);
    T value;
    if constexpr (std::is_same_v<T, Wire> || std::is_same_v<Wire, bool> || std::is_floating_point_v<T>) {
      value = static_cast<T>(v);
    } else {
      if (!std::in_range<T>(v)) {
        return InvalidArgument("element " + std::to_string(i) + ": " + std::to_string(v) + " is out of range for " +
                               std::string(DataTypeName(type)));
      }
      value = static_cast<T>(v);
    }
    std::memcpy(dst + static_cast<size_t>(i) * sizeof(T), &value, sizeof(T));
  }
  return tensor;
}

// The one typed field that holds `type`'s elements; elements in any other field are an error.
Result<Tensor> FromTypedContents(const InferTensorContents& c, const std::string& name, DataType type,
                                 const Shape& shape) {
  if (type == DataType::kFp16 || type == DataType::kBf16) {
    return InvalidArgument(std::string(DataTypeName(type)) + " has no typed contents: send it in raw_input_contents");
  }
  size_t total = TypedCount(c);
  auto only = [&](int in_field, const char* field) -> Status {
    if (static_cast<size_t>(in_field) != total) {
      return InvalidArgument(std::string("contents for ") + std::string(DataTypeName(type)) + " belong in '" + field +
                             "' only");
    }
    return Status::Ok();
  };
  switch (type) {
    case DataType::kBool: {
      WEFT_RETURN_IF_ERROR(only(c.bool_contents_size(), "bool_contents"));
      return FromRepeated<uint8_t>(c.bool_contents(), "bool_contents", name, type, shape);
    }
    case DataType::kInt8:
      WEFT_RETURN_IF_ERROR(only(c.int_contents_size(), "int_contents"));
      return FromRepeated<int8_t>(c.int_contents(), "int_contents", name, type, shape);
    case DataType::kInt16:
      WEFT_RETURN_IF_ERROR(only(c.int_contents_size(), "int_contents"));
      return FromRepeated<int16_t>(c.int_contents(), "int_contents", name, type, shape);
    case DataType::kInt32:
      WEFT_RETURN_IF_ERROR(only(c.int_contents_size(), "int_contents"));
      return FromRepeated<int32_t>(c.int_contents(), "int_contents", name, type, shape);
    case DataType::kInt64:
      WEFT_RETURN_IF_ERROR(only(c.int64_contents_size(), "int64_contents"));
      return FromRepeated<int64_t>(c.int64_contents(), "int64_contents", name, type, shape);
    case DataType::kUint8:
      WEFT_RETURN_IF_ERROR(only(c.uint_contents_size(), "uint_contents"));
      return FromRepeated<uint8_t>(c.uint_contents(), "uint_contents", name, type, shape);
    case DataType::kUint16:
      WEFT_RETURN_IF_ERROR(only(c.uint_contents_size(), "uint_contents"));
      return FromRepeated<uint16_t>(c.uint_contents(), "uint_contents", name, type, shape);
    case DataType::kUint32:
      WEFT_RETURN_IF_ERROR(only(c.uint_contents_size(), "uint_contents"));
      return FromRepeated<uint32_t>(c.uint_contents(), "uint_contents", name, type, shape);
    case DataType::kUint64:
      WEFT_RETURN_IF_ERROR(only(c.uint64_contents_size(), "uint64_contents"));
      return FromRepeated<uint64_t>(c.uint64_contents(), "uint64_contents", name, type, shape);
    case DataType::kFp32:
      WEFT_RETURN_IF_ERROR(only(c.fp32_contents_size(), "fp32_contents"));
      return FromRepeated<float>(c.fp32_contents(), "fp32_contents", name, type, shape);
    case DataType::kFp64:
      WEFT_RETURN_IF_ERROR(only(c.fp64_contents_size(), "fp64_contents"));
      return FromRepeated<double>(c.fp64_contents(), "fp64_contents", name, type, shape);
    case DataType::kBytes: {
      WEFT_RETURN_IF_ERROR(only(c.bytes_contents_size(), "bytes_contents"));
      int64_t count = ElementCount(shape);
      if (c.bytes_contents_size() != count) return CountError("bytes_contents", c.bytes_contents_size(), count, shape);
      for (const std::string& e : c.bytes_contents()) {
        if (e.size() > std::numeric_limits<uint32_t>::max()) return InvalidArgument("a BYTES element is too long");
      }
      std::vector<std::string> elements(c.bytes_contents().begin(), c.bytes_contents().end());
      return Tensor::FromBytes(name, type, shape, JoinBytesElements(elements));
    }
    default: return InvalidArgument("no typed contents for datatype " + std::string(DataTypeName(type)));
  }
}

// A raw input: a view of the message's bytes when aligned for its type, a copy otherwise.
Result<Tensor> FromRaw(const std::string& raw, const std::shared_ptr<const ModelInferRequest>& message,
                       const std::string& name, DataType type, const Shape& shape) {
  auto bytes = std::span(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, bytes));
  size_t alignment = std::max<size_t>(1, DataTypeSize(type));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignment != 0) {
    // Short strings live inside the message (small-string storage) at any address.
    return Tensor::FromBytes(name, type, shape, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  return Tensor(name, type, shape, message, bytes.data(), bytes.size());
}

Result<Shape> ShapeOf(const RepeatedField<int64_t>& dims) {
  if (static_cast<size_t>(dims.size()) > kMaxTensorRank) {
    return InvalidArgument("'shape' has " + std::to_string(dims.size()) + " dimensions, more than the " +
                           std::to_string(kMaxTensorRank) + " allowed");
  }
  Shape shape(dims.begin(), dims.end());
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("'shape' must hold non-negative integers");
  }
  if (ElementCount(shape) < 0) return InvalidArgument("shape " + ShapeToString(shape) + " is too large");
  return shape;
}

Status DecodeParameters(const ParameterMap& parameters, InferenceRequest* request) {
  for (const auto& [key, p] : parameters) {
    if (key == "priority") {
      std::optional<uint64_t> v = AsUnsigned(p);
      if (!v || *v > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' must be an integer from 0 to 4294967295");
      }
      request->priority = static_cast<uint32_t>(*v);
    } else if (key == "timeout") {
      std::optional<uint64_t> v = AsUnsigned(p);
      if (!v) return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
      if (*v > 0) request->deadline = request->arrival + Micros(std::min(*v, kMaxTimeoutMicros));
    } else if (key == "binary_data_output") {
      // The HTTP binary extension's switch; gRPC outputs are always raw.
    } else {
      switch (p.parameter_choice_case()) {
        case InferParameter::kBoolParam: request->parameters[key] = p.bool_param(); break;
        case InferParameter::kInt64Param: request->parameters[key] = p.int64_param(); break;
        case InferParameter::kUint64Param:
          // ParameterValue has no uint64: values past int64 keep their magnitude as a double, as over HTTP.
          if (std::in_range<int64_t>(p.uint64_param())) {
            request->parameters[key] = static_cast<int64_t>(p.uint64_param());
          } else {
            request->parameters[key] = static_cast<double>(p.uint64_param());
          }
          break;
        case InferParameter::kDoubleParam: request->parameters[key] = p.double_param(); break;
        case InferParameter::kStringParam: request->parameters[key] = p.string_param(); break;
        default: return InvalidArgument("parameter " + Quoted(key) + " has no value");
      }
    }
  }
  return Status::Ok();
}

Status DecodeRequestedOutputs(const ModelInferRequest& message, const SharedMemoryRegistry* registry,
                              DecodedModelInfer* out) {
  std::set<std::string> seen;
  for (const auto& output : message.outputs()) {
    if (output.name().empty()) return InvalidArgument("a requested output has no 'name'");
    std::string where = "output " + Quoted(output.name());
    if (!seen.insert(output.name()).second) return InvalidArgument(where + " is requested twice");
    if (auto classification = output.parameters().find("classification"); classification != output.parameters().end()) {
      const InferParameter& count = classification->second;
      if (count.parameter_choice_case() != InferParameter::kInt64Param || count.int64_param() < 0 ||
          count.int64_param() > UINT32_MAX) {
        return InvalidArgument(where + ": 'classification' must be an int64_param in [0, " +
                               std::to_string(UINT32_MAX) + "]");
      }
      if (count.int64_param() > 0) {
        out->request->class_counts[output.name()] = static_cast<uint32_t>(count.int64_param());
      }
    }
    WEFT_ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> ref, SharedMemoryRefOf(output.parameters(), where, registry));
    if (ref) {
      Result<SharedMemorySlice> slice = registry->Slice(*ref);
      if (!slice.ok()) return slice.status().WithContext(where);
      out->shared_memory_outputs.emplace(output.name(), std::move(slice).value());
    }
    out->request->requested_outputs.push_back(output.name());
  }
  return Status::Ok();
}

}  // namespace

Result<int64_t> ParseModelVersion(const std::string& model, const std::string& version) {
  if (version.empty()) return int64_t{0};
  int64_t v = 0;
  auto [end, ec] = std::from_chars(version.data(), version.data() + version.size(), v);
  if (ec != std::errc() || end != version.data() + version.size() || v <= 0) {
    return NotFound("model " + Quoted(model) + " has no version " + Quoted(version) +
                    " (versions are positive integers)");
  }
  return v;
}

namespace {

Result<DecodedModelInfer> DecodeUnguarded(std::shared_ptr<const ModelInferRequest> message, SteadyTime arrival,
                                          const SharedMemoryRegistry* shared_memory) {
  const ModelInferRequest& m = *message;
  DecodedModelInfer out;
  out.request = std::make_unique<InferenceRequest>();
  InferenceRequest& request = *out.request;
  request.arrival = arrival;
  request.model_name = m.model_name();
  WEFT_ASSIGN_OR_RETURN(request.model_version, ParseModelVersion(m.model_name(), m.model_version()));
  request.id = m.id();
  WEFT_RETURN_IF_ERROR(DecodeParameters(m.parameters(), &request));
  WEFT_RETURN_IF_ERROR(DecodeRequestedOutputs(m, shared_memory, &out));

  bool raw = m.raw_input_contents_size() > 0;
  if (raw && m.raw_input_contents_size() != m.inputs_size()) {
    return InvalidArgument("raw_input_contents has " + std::to_string(m.raw_input_contents_size()) + " entries for " +
                           std::to_string(m.inputs_size()) + " inputs: it needs one per input");
  }
  std::set<std::string> names;
  for (int i = 0; i < m.inputs_size(); ++i) {
    const auto& input = m.inputs(i);
    if (input.name().empty()) return InvalidArgument("an input has no 'name'");
    std::string where = "input " + Quoted(input.name());
    if (!names.insert(input.name()).second) return InvalidArgument(where + " appears twice");
    std::optional<DataType> type = DataTypeFromName(input.datatype());
    if (!type) return InvalidArgument(where + ": unknown datatype " + Quoted(input.datatype()));
    Result<Shape> shape = ShapeOf(input.shape());
    if (!shape.ok()) return shape.status().WithContext(where);
    bool typed = input.has_contents() && TypedCount(input.contents()) > 0;
    if (typed && raw) {
      return InvalidArgument(where +
                             ": has typed 'contents' while the request uses raw_input_contents; a request uses "
                             "one or the other for all its inputs");
    }
    WEFT_ASSIGN_OR_RETURN(std::optional<SharedMemoryRef> ref,
                          SharedMemoryRefOf(input.parameters(), where, shared_memory));

    auto decode = [&]() -> Result<Tensor> {
      if (ref) {
        if (typed || (raw && !m.raw_input_contents(i).empty())) {
          return InvalidArgument("names a shared memory region and also carries data");
        }
        WEFT_ASSIGN_OR_RETURN(SharedMemorySlice slice, shared_memory->Slice(*ref));
        out.shared_memory_inputs.push_back(slice);
        return SharedMemoryInput(slice, input.name(), *type, *shape);
      }
      if (raw) return FromRaw(m.raw_input_contents(i), message, input.name(), *type, *shape);
      if (typed || ElementCount(*shape) == 0) return FromTypedContents(input.contents(), input.name(), *type, *shape);
      return InvalidArgument("has no data (typed 'contents', raw_input_contents or shared memory)");
    };
    Result<Tensor> tensor = decode();
    if (!tensor.ok()) return tensor.status().WithContext(where);
    request.inputs.push_back(std::move(tensor).value());
  }
  return out;
}

}  // namespace

Result<DecodedModelInfer> DecodeModelInferRequest(std::shared_ptr<const ModelInferRequest> message, SteadyTime arrival,
                                                  const SharedMemoryRegistry* shared_memory) {
  // A request's tensors are allocated (copies of unaligned or shared-memory bytes) at sizes its client chose. An
  // allocation that fails must answer this request, not escape into gRPC: its callback handlers swallow the
  // exception, and a stream would then wait for an answer that never comes.
  try {
    return DecodeUnguarded(std::move(message), arrival, shared_memory);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  } catch (const std::exception& e) {
    return Internal(std::string("decoding the request failed: ") + e.what());
  }
  return ResourceExhausted("the request's inputs need more memory than the server can allocate");
}

Status EncodeModelInferResponse(const InferenceResponse& response, const std::vector<std::string>& requested,
                                const SharedMemoryOutputs& shared_memory_outputs,
                                std::span<const SharedMemorySlice> shared_memory_inputs, ModelInferResponse* out) {
  std::vector<const Tensor*> outputs;
  if (requested.empty()) {
    for (const Tensor& t : response.outputs) outputs.push_back(&t);
  } else {
    for (const std::string& name : requested) {
      const Tensor* found = nullptr;
      for (const Tensor& t : response.outputs) {
        if (t.name() == name) found = &t;
      }
      if (!found) return Internal("the response lacks the requested output " + Quoted(name));
      outputs.push_back(found);
    }
  }
  out->set_model_name(response.model_name);
  out->set_model_version(std::to_string(response.model_version));
  out->set_id(response.id);
  for (const auto& [key, value] : response.parameters) (*out->mutable_parameters())[key].set_string_param(value);
  for (const Tensor* t : outputs) {
    if (t->place().kind == MemoryKind::kGpu) {
      return Internal("output " + Quoted(t->name()) + " is in GPU memory; the backend must return host memory");
    }
    Status valid = ValidateTensorBytes(t->type(), t->shape(), t->bytes());
    if (!valid.ok()) return Internal(valid.WithContext("output " + Quoted(t->name())).message());
    auto* tensor = out->add_outputs();
    tensor->set_name(t->name());
    tensor->set_datatype(std::string(DataTypeName(t->type())));
    for (int64_t d : t->shape()) tensor->add_shape(d);
    std::string* raw = out->add_raw_output_contents();
    auto shm = shared_memory_outputs.find(t->name());
    if (shm == shared_memory_outputs.end()) {
      raw->assign(reinterpret_cast<const char*>(t->data()), t->byte_size());
      continue;
    }
    WEFT_RETURN_IF_ERROR(WriteSharedMemoryOutput(*t, shm->second));
    auto& parameters = *tensor->mutable_parameters();
    parameters["shared_memory_region"].set_string_param(shm->second.region);
    parameters["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(t->byte_size()));
  }
  // After the outputs are written: a truncation during the writes must fail the request too.
  return CheckSharedMemoryIntact(shared_memory_inputs, shared_memory_outputs);
}

}  // namespace weft
