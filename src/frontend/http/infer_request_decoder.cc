#include <simdjson.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "base/checked_math.h"
#include "frontend/http/float16.h"
#include "frontend/http/infer_codec.h"
#include "frontend/http/request_body.h"

namespace weft {

namespace dom = simdjson::dom;
using Type = dom::element_type;

static_assert(simdjson::SIMDJSON_PADDING <= kRequestBodyPadding,
              "request bodies must carry the padding simdjson reads");

namespace {

// Documents up to this size reuse a parser per thread; bigger ones get a parser that is freed afterwards, so that
// one huge request does not pin its parse buffers to an I/O thread for good.
constexpr size_t kReusedParserMaxBytes = size_t{4} << 20;

// By value: iterating `x.get_array().value_unsafe()` directly would dangle (it refers into a temporary).
dom::array ArrayOf(dom::element e) { return e.get_array().value_unsafe(); }
dom::object ObjectOf(dom::element e) { return e.get_object().value_unsafe(); }

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

Status FieldError(std::string_view where, std::string_view what) {
  return InvalidArgument(std::string(where) + ": " + std::string(what));
}

// A non-negative JSON integer, or nullopt.
std::optional<uint64_t> AsUnsigned(dom::element e) {
  if (e.type() == Type::UINT64) return e.get_uint64().value_unsafe();
  if (e.type() == Type::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (v >= 0) return static_cast<uint64_t>(v);
  }
  return std::nullopt;
}

// The part of the body after the JSON, handed out to inputs in order.
struct BinarySection {
  std::span<const std::byte> bytes;
  size_t used = 0;
  const std::shared_ptr<const void>* owner;
};

// Fills a tensor's elements from a flat or nested JSON array, in row-major order; the nesting is not checked
// against the shape, only the element count. `store(element, index)` converts one leaf.
template <typename Store>
class LeafWalker {
 public:
  LeafWalker(int64_t count, Store store) : count_(count), store_(std::move(store)) {}

  Status Walk(dom::element e) {
    if (e.type() == Type::ARRAY) {
      for (dom::element child : ArrayOf(e)) WEFT_RETURN_IF_ERROR(Walk(child));
      return Status::Ok();
    }
    if (index_ >= count_) return InvalidArgument("data has more elements than the shape holds");
    WEFT_RETURN_IF_ERROR(store_(e, index_));
    ++index_;
    return Status::Ok();
  }
  int64_t visited() const { return index_; }

 private:
  int64_t count_;
  int64_t index_ = 0;
  Store store_;
};

template <typename Store>
Status WalkLeaves(dom::element data, int64_t count, const Shape& shape, Store store) {
  LeafWalker<Store> walker(count, std::move(store));
  WEFT_RETURN_IF_ERROR(walker.Walk(data));
  if (walker.visited() != count) {
    return InvalidArgument("data has " + std::to_string(walker.visited()) + " elements, shape " + ShapeToString(shape) +
                           " needs " + std::to_string(count));
  }
  return Status::Ok();
}

Status ElementError(int64_t index, std::string_view what) {
  return InvalidArgument("element " + std::to_string(index) + ": " + std::string(what));
}

template <typename T>
Status StoreInteger(dom::element e, int64_t index, DataType type, std::byte* dst) {
  T value;
  if (e.type() == Type::INT64) {
    int64_t v = e.get_int64().value_unsafe();
    if (!std::in_range<T>(v)) {
      return ElementError(index, std::to_string(v) + " is out of range for " + std::string(DataTypeName(type)));
    }
    value = static_cast<T>(v);
  } else if (e.type() == Type::UINT64) {
    uint64_t v = e.get_uint64().value_unsafe();
    if (!std::in_range<T>(v)) {
      return ElementError(index, std::to_string(v) + " is out of range for " + std::string(DataTypeName(type)));
    }
    value = static_cast<T>(v);
  } else {
    return ElementError(index, "expected an integer for " + std::string(DataTypeName(type)));
  }
  std::memcpy(dst + index * sizeof(T), &value, sizeof(T));
  return Status::Ok();
}

// A JSON number as a double, or nullopt for anything else.
std::optional<double> AsNumber(dom::element e) {
  switch (e.type()) {
    case Type::DOUBLE: return e.get_double().value_unsafe();
    case Type::INT64: return static_cast<double>(e.get_int64().value_unsafe());
    case Type::UINT64: return static_cast<double>(e.get_uint64().value_unsafe());
    default: return std::nullopt;
  }
}

// A double as a float, or nullopt when it rounds to infinity (converting it would be undefined).
std::optional<float> ToFloat(double v) {
  // Doubles from here on round to infinity: FLT_MAX plus half of its ulp (ties go to the even infinity).
  static const double kFloatOverflow = std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
  if (std::fabs(v) >= kFloatOverflow) return std::nullopt;
  return static_cast<float>(v);
}

// "NaN", "Infinity" and "-Infinity": how the encoder writes non-finite values (JSON has no spelling for them).
std::optional<double> NonFinite(dom::element e) {
  if (e.type() != Type::STRING) return std::nullopt;
  std::string_view s = e.get_string().value_unsafe();
  if (s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (s == "Infinity") return std::numeric_limits<double>::infinity();
  if (s == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

Status StoreFloating(dom::element e, int64_t index, DataType type, std::byte* dst) {
  if (std::optional<double> special = NonFinite(e)) {
    if (type == DataType::kFp64) {
      std::memcpy(dst + index * 8, &*special, 8);
    } else if (type == DataType::kFp32) {
      const float f = static_cast<float>(*special);
      std::memcpy(dst + index * 4, &f, 4);
    } else {
      const float f = static_cast<float>(*special);
      const uint16_t bits = type == DataType::kFp16 ? FloatToHalf(f) : FloatToBfloat16(f);
      std::memcpy(dst + index * 2, &bits, 2);
    }
    return Status::Ok();
  }
  std::optional<double> number = AsNumber(e);
  if (!number) {
    return ElementError(
        index, "expected a number (or \"NaN\", \"Infinity\", \"-Infinity\") for " + std::string(DataTypeName(type)));
  }
  auto out_of_range = [&] {
    return ElementError(index, std::to_string(*number) + " is out of range for " + std::string(DataTypeName(type)));
  };
  if (type == DataType::kFp64) {
    std::memcpy(dst + index * 8, &*number, 8);
    return Status::Ok();
  }
  std::optional<float> f = ToFloat(*number);
  if (!f) return out_of_range();
  if (type == DataType::kFp32) {
    std::memcpy(dst + index * 4, &*f, 4);
    return Status::Ok();
  }
  // Through float: a double that lies within half an float ulp of a 16-bit tie may round differently than a
  // direct conversion would. JSON clients that care send binary data.
  uint16_t bits = type == DataType::kFp16 ? FloatToHalf(*f) : FloatToBfloat16(*f);
  float back = type == DataType::kFp16 ? HalfToFloat(bits) : Bfloat16ToFloat(bits);
  if (std::isinf(back)) return out_of_range();
  std::memcpy(dst + index * 2, &bits, 2);
  return Status::Ok();
}

// The common FP32 case, a flat array of plain numbers, in one pass: no per-element call, Status or check for the
// non-finite spellings. False when the data is anything else (nested, a string, out of range, a wrong count); the
// caller then takes the general walk, which also words the error.
bool StoreFlatFloats(dom::element data, int64_t count, std::byte* dst) {
  int64_t index = 0;
  for (dom::element e : ArrayOf(data)) {
    if (index == count) return false;
    std::optional<double> number = AsNumber(e);
    if (!number) return false;
    std::optional<float> f = ToFloat(*number);
    if (!f) return false;
    std::memcpy(dst + index * 4, &*f, 4);
    ++index;
  }
  return index == count;
}

Status StoreBool(dom::element e, int64_t index, std::byte* dst) {
  if (e.type() != Type::BOOL) return ElementError(index, "expected true or false for BOOL");
  dst[index] = std::byte{e.get_bool().value_unsafe() ? uint8_t{1} : uint8_t{0}};
  return Status::Ok();
}

Result<Tensor> DecodeJsonData(const std::string& name, DataType type, const Shape& shape, dom::element data,
                              size_t json_size) {
  if (data.type() != Type::ARRAY) return InvalidArgument("'data' must be an array");
  int64_t count = ElementCount(shape);
  if (type == DataType::kBytes) {
    std::vector<std::byte> bytes;
    WEFT_RETURN_IF_ERROR(WalkLeaves(data, count, shape, [&](dom::element e, int64_t index) -> Status {
      if (e.type() != Type::STRING) return ElementError(index, "expected a string for BYTES");
      std::string_view s = e.get_string().value_unsafe();
      if (s.size() > std::numeric_limits<uint32_t>::max()) return ElementError(index, "string is too long");
      uint32_t length = static_cast<uint32_t>(s.size());
      size_t at = bytes.size();
      bytes.resize(at + 4 + s.size());
      std::memcpy(bytes.data() + at, &length, 4);
      std::memcpy(bytes.data() + at + 4, s.data(), s.size());
      return Status::Ok();
    }));
    return Tensor::FromBytes(name, type, shape, std::move(bytes));
  }
  // Every element takes at least one character of JSON: a bigger shape cannot be filled, and checking first
  // keeps a hostile shape from allocating without bound.
  if (static_cast<uint64_t>(count) > json_size) {
    return InvalidArgument("shape " + ShapeToString(shape) + " has more elements than the request has data");
  }
  std::byte* dst = nullptr;
  Tensor tensor = Tensor::Allocate(name, type, shape, &dst);
  Status status;
  switch (type) {
    case DataType::kBool:
      status = WalkLeaves(data, count, shape, [&](dom::element e, int64_t i) { return StoreBool(e, i, dst); });
      break;
#define WEFT_INTEGER_CASE(kind, T)                                                                                   \
  case DataType::kind:                                                                                               \
    status =                                                                                                         \
        WalkLeaves(data, count, shape, [&](dom::element e, int64_t i) { return StoreInteger<T>(e, i, type, dst); }); \
    break;
      WEFT_INTEGER_CASE(kUint8, uint8_t)
      WEFT_INTEGER_CASE(kUint16, uint16_t)
      WEFT_INTEGER_CASE(kUint32, uint32_t)
      WEFT_INTEGER_CASE(kUint64, uint64_t)
      WEFT_INTEGER_CASE(kInt8, int8_t)
      WEFT_INTEGER_CASE(kInt16, int16_t)
      WEFT_INTEGER_CASE(kInt32, int32_t)
      WEFT_INTEGER_CASE(kInt64, int64_t)
#undef WEFT_INTEGER_CASE
    case DataType::kFp32:
      if (StoreFlatFloats(data, count, dst)) break;
      [[fallthrough]];
    case DataType::kFp16:
    case DataType::kFp64:
    case DataType::kBf16:
      status =
          WalkLeaves(data, count, shape, [&](dom::element e, int64_t i) { return StoreFloating(e, i, type, dst); });
      break;
    default: return Internal("no JSON decoding for datatype " + std::string(DataTypeName(type)));
  }
  if (!status.ok()) return status;
  return tensor;
}

Result<Tensor> TakeBinaryData(const std::string& name, DataType type, const Shape& shape, uint64_t size,
                              BinarySection* section) {
  size_t left = section->bytes.size() - section->used;
  if (size > left) {
    return InvalidArgument("binary_data_size " + std::to_string(size) + " exceeds the " + std::to_string(left) +
                           " bytes left in the binary section");
  }
  std::span<const std::byte> bytes = section->bytes.subspan(section->used, size);
  section->used += size;
  WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, bytes));
  size_t alignment = std::max<size_t>(1, DataTypeSize(type));
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignment != 0) {
    // Only a tensor that follows an odd-sized one lands here: the body is laid out so that the section starts
    // aligned. Backends read elements in place, so they get an aligned copy.
    return Tensor::FromBytes(name, type, shape, std::vector<std::byte>(bytes.begin(), bytes.end()));
  }
  return Tensor(name, type, shape, *section->owner, bytes.data(), bytes.size());
}

Result<Shape> DecodeShape(dom::element e) {
  if (e.type() != Type::ARRAY) return InvalidArgument("'shape' must be an array of integers");
  Shape shape;
  for (dom::element dim : ArrayOf(e)) {
    if (shape.size() == kMaxTensorRank) {
      return InvalidArgument("'shape' has more than the " + std::to_string(kMaxTensorRank) + " dimensions allowed");
    }
    std::optional<uint64_t> d = AsUnsigned(dim);
    if (!d || *d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return InvalidArgument("'shape' must hold non-negative integers");
    }
    shape.push_back(static_cast<int64_t>(*d));
  }
  if (ElementCount(shape) < 0) return InvalidArgument("shape " + ShapeToString(shape) + " is too large");
  return shape;
}

bool IsSharedMemoryParameter(std::string_view key) { return key.starts_with("shared_memory_"); }

// The shared_memory_* parameters of one input or requested output, as they are collected.
struct SharedMemoryParameters {
  bool any = false;
  std::optional<std::string> region;
  std::optional<uint64_t> offset, byte_size;
};

Status CollectSharedMemoryParameter(const dom::key_value_pair& p, SharedMemoryParameters* out) {
  out->any = true;
  if (p.key == "shared_memory_region") {
    if (p.value.type() != Type::STRING) return InvalidArgument("'shared_memory_region' must be a string");
    out->region = std::string(p.value.get_string().value_unsafe());
  } else if (p.key == "shared_memory_offset" || p.key == "shared_memory_byte_size") {
    std::optional<uint64_t> v = AsUnsigned(p.value);
    if (!v) return InvalidArgument("'" + std::string(p.key) + "' must be a non-negative integer");
    (p.key == "shared_memory_offset" ? out->offset : out->byte_size) = v;
  } else {
    return InvalidArgument("unknown parameter " + Quoted(p.key));
  }
  return Status::Ok();
}

// The region window the parameters name. Unimplemented when the extension is off.
Result<SharedMemoryRef> SharedMemoryRefOf(const SharedMemoryParameters& p, const SharedMemoryRegistry* registry) {
  if (registry == nullptr) {
    return Unimplemented("shared memory is not enabled on this server (weft serve --allow-shared-memory)");
  }
  if (!p.region || p.region->empty()) return InvalidArgument("'shared_memory_region' must name a region");
  if (!p.byte_size) return InvalidArgument("'shared_memory_byte_size' is required with 'shared_memory_region'");
  return SharedMemoryRef{*p.region, p.offset.value_or(0), *p.byte_size};
}

Result<Tensor> DecodeInput(dom::element input, BinarySection* section, size_t json_size,
                           const SharedMemoryRegistry* shared_memory, OutputFormat* format) {
  if (input.type() != Type::OBJECT) return InvalidArgument("each of 'inputs' must be an object");
  std::optional<std::string> name;
  std::optional<std::string_view> datatype;
  std::optional<dom::element> shape_json, data;
  std::optional<uint64_t> binary_size;
  SharedMemoryParameters shm;
  for (dom::key_value_pair field : ObjectOf(input)) {
    if (field.key == "name") {
      if (field.value.type() != Type::STRING) return InvalidArgument("an input's 'name' must be a string");
      name = std::string(field.value.get_string().value_unsafe());
    } else if (field.key == "datatype") {
      if (field.value.type() != Type::STRING) return InvalidArgument("an input's 'datatype' must be a string");
      datatype = field.value.get_string().value_unsafe();
    } else if (field.key == "shape") {
      shape_json = field.value;
    } else if (field.key == "data") {
      data = field.value;
    } else if (field.key == "parameters") {
      if (field.value.type() != Type::OBJECT) return InvalidArgument("an input's 'parameters' must be an object");
      for (dom::key_value_pair p : ObjectOf(field.value)) {
        if (p.key == "binary_data_size") {
          binary_size = AsUnsigned(p.value);
          if (!binary_size) return InvalidArgument("'binary_data_size' must be a non-negative integer");
        } else if (IsSharedMemoryParameter(p.key)) {
          WEFT_RETURN_IF_ERROR(CollectSharedMemoryParameter(p, &shm));
        }
      }
    }
  }
  if (!name || name->empty()) return InvalidArgument("an input has no 'name'");
  // Built only for an error: two allocations that every input would otherwise pay.
  auto where = [&] { return "input " + Quoted(*name); };
  if (!datatype) return FieldError(where(), "missing 'datatype'");
  std::optional<DataType> type = DataTypeFromName(*datatype);
  if (!type) return FieldError(where(), "unknown datatype " + Quoted(*datatype));
  if (!shape_json) return FieldError(where(), "missing 'shape'");
  Result<Shape> shape = DecodeShape(*shape_json);
  if (!shape.ok()) return shape.status().WithContext(where());

  if (shm.any) {
    if (binary_size || data) return FieldError(where(), "names a shared memory region and also carries data");
    Result<SharedMemoryRef> ref = SharedMemoryRefOf(shm, shared_memory);
    if (!ref.ok()) return ref.status().WithContext(where());
    Result<SharedMemorySlice> slice = shared_memory->Slice(*ref);
    if (!slice.ok()) return slice.status().WithContext(where());
    format->shared_memory_inputs.push_back(*slice);
    Result<Tensor> tensor = SharedMemoryInput(*slice, *name, *type, *shape);
    if (!tensor.ok()) return tensor.status().WithContext(where());
    return tensor;
  }
  if (binary_size && data) return FieldError(where(), "has both 'data' and 'binary_data_size'");
  if (!binary_size && !data) return FieldError(where(), "missing 'data' (or the 'binary_data_size' parameter)");
  Result<Tensor> tensor = binary_size ? TakeBinaryData(*name, *type, *shape, *binary_size, section)
                                      : DecodeJsonData(*name, *type, *shape, *data, json_size);
  if (!tensor.ok()) return tensor.status().WithContext(where());
  return tensor;
}

Status DecodeRequestedOutputs(dom::element outputs, const SharedMemoryRegistry* shared_memory,
                              InferenceRequest* request, OutputFormat* format) {
  if (outputs.type() != Type::ARRAY) return InvalidArgument("'outputs' must be an array");
  std::set<std::string> seen;
  for (dom::element output : ArrayOf(outputs)) {
    if (output.type() != Type::OBJECT) return InvalidArgument("each of 'outputs' must be an object");
    std::optional<std::string> name;
    std::optional<bool> binary;
    uint32_t class_count = 0;  // 0: the values themselves, as when the parameter is absent (Triton's clients)
    SharedMemoryParameters shm;
    for (dom::key_value_pair field : ObjectOf(output)) {
      if (field.key == "name") {
        if (field.value.type() != Type::STRING) return InvalidArgument("an output's 'name' must be a string");
        name = std::string(field.value.get_string().value_unsafe());
      } else if (field.key == "parameters") {
        if (field.value.type() != Type::OBJECT) return InvalidArgument("an output's 'parameters' must be an object");
        for (dom::key_value_pair p : ObjectOf(field.value)) {
          if (p.key == "binary_data") {
            if (p.value.type() != Type::BOOL) return InvalidArgument("'binary_data' must be true or false");
            binary = p.value.get_bool().value_unsafe();
          } else if (p.key == "classification") {
            std::optional<uint64_t> count = AsUnsigned(p.value);
            if (!count || *count > UINT32_MAX) {
              return InvalidArgument("'classification' must be an integer in [0, " + std::to_string(UINT32_MAX) + "]");
            }
            class_count = static_cast<uint32_t>(*count);
          } else if (IsSharedMemoryParameter(p.key)) {
            WEFT_RETURN_IF_ERROR(CollectSharedMemoryParameter(p, &shm));
          }
        }
      }
    }
    if (!name || name->empty()) return InvalidArgument("a requested output has no 'name'");
    if (!seen.insert(*name).second) return InvalidArgument("output " + Quoted(*name) + " is requested twice");
    if (shm.any) {
      std::string where = "output " + Quoted(*name);
      Result<SharedMemoryRef> ref = SharedMemoryRefOf(shm, shared_memory);
      if (!ref.ok()) return ref.status().WithContext(where);
      Result<SharedMemorySlice> slice = shared_memory->Slice(*ref);
      if (!slice.ok()) return slice.status().WithContext(where);
      format->shared_memory.emplace(*name, std::move(slice).value());
    }
    request->requested_outputs.push_back(*name);
    if (class_count > 0) request->class_counts[*name] = class_count;
    format->requested.push_back(*name);
    if (binary) format->binary[*name] = *binary;
  }
  return Status::Ok();
}

Status DecodeRequestParameters(dom::element parameters, InferenceRequest* request, OutputFormat* format) {
  if (parameters.type() != Type::OBJECT) return InvalidArgument("'parameters' must be an object");
  for (dom::key_value_pair p : ObjectOf(parameters)) {
    std::string key(p.key);
    if (key == "priority") {
      std::optional<uint64_t> v = AsUnsigned(p.value);
      if (!v || *v > std::numeric_limits<uint32_t>::max()) {
        return InvalidArgument("parameter 'priority' must be an integer from 0 to 4294967295");
      }
      request->priority = static_cast<uint32_t>(*v);
    } else if (key == "timeout") {
      std::optional<uint64_t> v = AsUnsigned(p.value);
      if (!v) return InvalidArgument("parameter 'timeout' must be a non-negative integer (microseconds)");
      if (*v > 0) request->deadline = request->arrival + Micros(std::min(*v, kMaxTimeoutMicros));
    } else if (key == "binary_data_output") {
      if (p.value.type() != Type::BOOL) return InvalidArgument("parameter 'binary_data_output' must be true or false");
      format->binary_by_default = p.value.get_bool().value_unsafe();
    } else {
      switch (p.value.type()) {
        case Type::BOOL: request->parameters[key] = p.value.get_bool().value_unsafe(); break;
        case Type::INT64: request->parameters[key] = p.value.get_int64().value_unsafe(); break;
        // ParameterValue has no uint64: values past int64 keep their magnitude as a double.
        case Type::UINT64: request->parameters[key] = static_cast<double>(p.value.get_uint64().value_unsafe()); break;
        case Type::DOUBLE: request->parameters[key] = p.value.get_double().value_unsafe(); break;
        case Type::STRING: request->parameters[key] = std::string(p.value.get_string().value_unsafe()); break;
        default: return InvalidArgument("parameter " + Quoted(key) + " must be a string, a number or a boolean");
      }
    }
  }
  return Status::Ok();
}

Result<DecodedInferRequest> DecodeDocument(dom::element root, BinarySection* section, size_t json_size,
                                           SteadyTime arrival, const SharedMemoryRegistry* shared_memory) {
  if (root.type() != Type::OBJECT) return InvalidArgument("the inference request must be a JSON object");
  DecodedInferRequest out;
  out.request = std::make_unique<InferenceRequest>();
  InferenceRequest& request = *out.request;
  request.arrival = arrival;
  std::optional<dom::element> inputs;
  for (dom::key_value_pair field : ObjectOf(root)) {
    if (field.key == "id") {
      if (field.value.type() != Type::STRING) return InvalidArgument("'id' must be a string");
      request.id = std::string(field.value.get_string().value_unsafe());
    } else if (field.key == "parameters") {
      WEFT_RETURN_IF_ERROR(DecodeRequestParameters(field.value, &request, &out.output_format));
    } else if (field.key == "inputs") {
      inputs = field.value;
    } else if (field.key == "outputs") {
      WEFT_RETURN_IF_ERROR(DecodeRequestedOutputs(field.value, shared_memory, &request, &out.output_format));
    }
  }
  if (!inputs) return InvalidArgument("the request has no 'inputs'");
  if (inputs->type() != Type::ARRAY) return InvalidArgument("'inputs' must be an array");
  std::set<std::string> names;
  for (dom::element input : ArrayOf(*inputs)) {
    WEFT_ASSIGN_OR_RETURN(Tensor tensor, DecodeInput(input, section, json_size, shared_memory, &out.output_format));
    if (!names.insert(tensor.name()).second) {
      return InvalidArgument("input " + Quoted(tensor.name()) + " appears twice");
    }
    request.inputs.push_back(std::move(tensor));
  }
  if (section->used != section->bytes.size()) {
    return InvalidArgument("the binary section has " + std::to_string(section->bytes.size()) +
                           " bytes but the inputs' binary_data_size add up to " + std::to_string(section->used));
  }
  return out;
}

}  // namespace

bool OutputFormat::IsBinary(const std::string& output) const {
  auto it = binary.find(output);
  return it == binary.end() ? binary_by_default : it->second;
}

Result<DecodedInferRequest> DecodeInferRequest(const InferBody& body, SteadyTime arrival) {
  size_t json_size = body.json_size.value_or(body.bytes.size());
  if (json_size > body.bytes.size()) {
    return InvalidArgument("Inference-Header-Content-Length " + std::to_string(json_size) + " exceeds the body size " +
                           std::to_string(body.bytes.size()));
  }
  BinarySection section{body.bytes.subspan(json_size), 0, &body.owner};
  const auto* json = reinterpret_cast<const uint8_t*>(body.bytes.data());

  thread_local dom::parser reused_parser;
  std::optional<dom::parser> one_off_parser;
  dom::parser* parser = &reused_parser;
  if (json_size > kReusedParserMaxBytes) parser = &one_off_parser.emplace();
  dom::element root;
  // In place: the body's padding (or the binary section) follows the JSON.
  if (auto error = parser->parse(json, json_size, /*realloc_if_needed=*/false).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  return DecodeDocument(root, &section, json_size, arrival, body.shared_memory);
}

Result<DecodedInferRequest> DecodeRawInferRequest(const InferBody& body, const ModelConfig& config,
                                                  SteadyTime arrival) {
  if (config.inputs.size() != 1) {
    return InvalidArgument("a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input; " +
                           Quoted(config.name) + " has " + std::to_string(config.inputs.size()));
  }
  const TensorConfig& input = config.inputs[0];
  Shape shape = FullShape(config, input);
  if (config.max_batch_size > 0) shape[0] = 1;
  DecodedInferRequest out;
  out.request = std::make_unique<InferenceRequest>();
  out.request->arrival = arrival;
  out.output_format.binary_by_default = true;

  if (input.data_type == DataType::kBytes) {
    for (int64_t& d : shape) d = d < 0 ? 1 : d;
    if (ElementCount(shape) != 1) {
      return InvalidArgument("a raw binary request carries one BYTES element; input " + Quoted(input.name) +
                             " has shape " + ShapeToString(FullShape(config, input)));
    }
    if (body.bytes.size() > std::numeric_limits<uint32_t>::max()) return InvalidArgument("the element is too long");
    uint32_t length = static_cast<uint32_t>(body.bytes.size());
    std::vector<std::byte> bytes(4 + body.bytes.size());
    std::memcpy(bytes.data(), &length, 4);
    if (length > 0) std::memcpy(bytes.data() + 4, body.bytes.data(), length);
    out.request->inputs.push_back(Tensor::FromBytes(input.name, input.data_type, shape, std::move(bytes)));
    return out;
  }

  size_t variable = 0;
  std::optional<uint64_t> fixed_bytes = DataTypeSize(input.data_type);
  for (int64_t d : shape) {
    if (d < 0) {
      ++variable;
    } else if (fixed_bytes) {
      fixed_bytes = CheckedMul(*fixed_bytes, static_cast<uint64_t>(d));
    }
  }
  if (!fixed_bytes) {
    return InvalidArgument("input " + Quoted(input.name) + " of shape " + ShapeToString(FullShape(config, input)) +
                           " is too large for any request");
  }
  if (variable > 1) {
    return InvalidArgument("a raw binary request needs an input with at most one variable dimension; " +
                           Quoted(input.name) + " has shape " + ShapeToString(FullShape(config, input)));
  }
  if (variable == 1) {
    if (*fixed_bytes == 0 || body.bytes.size() % *fixed_bytes != 0) {
      return InvalidArgument("the raw binary body of " + std::to_string(body.bytes.size()) +
                             " bytes is not a whole number of elements of input " + Quoted(input.name));
    }
    for (int64_t& d : shape) {
      if (d < 0) d = static_cast<int64_t>(body.bytes.size() / *fixed_bytes);
    }
  }
  Status valid = ValidateTensorBytes(input.data_type, shape, body.bytes);
  if (!valid.ok()) return valid.WithContext("input " + Quoted(input.name));
  // The body starts aligned (no binary offset header anchors it elsewhere), so the input views it in place.
  out.request->inputs.emplace_back(input.name, input.data_type, shape, body.owner, body.bytes.data(),
                                   body.bytes.size());
  return out;
}

}  // namespace weft
