#include "loadgen/input_generator.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "loadgen/deterministic_random.h"

namespace weft {

namespace {

constexpr int64_t kMaxInputBytes = int64_t{2} << 30;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

void AppendLittleEndian(uint64_t value, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// k/1024 for |k| <= 1024 as binary16 bits: every such value is a normal half, so the bits are exact.
uint16_t HalfBitsOfKOver1024(int64_t k) {
  if (k == 0) return 0;
  uint64_t m = static_cast<uint64_t>(k < 0 ? -k : k);
  int e = std::bit_width(m) - 1;  // m = 1.f * 2^e, value = 1.f * 2^(e - 10)
  uint16_t bits = static_cast<uint16_t>(((e + 5) << 10) | ((m << (10 - e)) & 0x3ff));
  return k < 0 ? static_cast<uint16_t>(bits | 0x8000) : bits;
}

// k/128 for |k| <= 128 as bfloat16 bits, exact for the same reason.
uint16_t Bfloat16BitsOfKOver128(int64_t k) {
  if (k == 0) return 0;
  uint64_t m = static_cast<uint64_t>(k < 0 ? -k : k);
  int e = std::bit_width(m) - 1;  // value = 1.f * 2^(e - 7)
  uint16_t bits = static_cast<uint16_t>(((e + 120) << 7) | ((m << (7 - e)) & 0x7f));
  return k < 0 ? static_cast<uint16_t>(bits | 0x8000) : bits;
}

void AppendRandomElements(DataType type, int64_t count, int64_t string_length, DeterministicRandom* random,
                          std::string* out) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  for (int64_t i = 0; i < count; ++i) {
    switch (type) {
      case DataType::kBool: out->push_back(static_cast<char>(random->NextBelow(2))); break;
      case DataType::kUint8:
      case DataType::kUint16:
      case DataType::kUint32:
      case DataType::kUint64:
      case DataType::kInt8:
      case DataType::kInt16:
      case DataType::kInt32:
      case DataType::kInt64: AppendLittleEndian(random->NextBelow(100), DataTypeSize(type), out); break;
      case DataType::kFp16:
        AppendLittleEndian(HalfBitsOfKOver1024(static_cast<int64_t>(random->NextBelow(2049)) - 1024), 2, out);
        break;
      case DataType::kBf16:
        AppendLittleEndian(Bfloat16BitsOfKOver128(static_cast<int64_t>(random->NextBelow(257)) - 128), 2, out);
        break;
      case DataType::kFp32: {
        float v = static_cast<float>(random->NextUnit() * 2 - 1);
        AppendLittleEndian(std::bit_cast<uint32_t>(v), 4, out);
        break;
      }
      case DataType::kFp64: {
        double v = random->NextUnit() * 2 - 1;
        AppendLittleEndian(std::bit_cast<uint64_t>(v), 8, out);
        break;
      }
      case DataType::kBytes:
        AppendLittleEndian(static_cast<uint64_t>(string_length), 4, out);
        for (int64_t c = 0; c < string_length; ++c) out->push_back(kAlphabet[random->NextBelow(sizeof(kAlphabet) - 1)]);
        break;
      case DataType::kInvalid: break;  // rejected by ParseModelMetadata
    }
  }
}

}  // namespace

int64_t GeneratedInput::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<std::vector<std::vector<int64_t>>> ResolveInputShapes(const ModelMetadata& metadata,
                                                             const InputGenerationOptions& options) {
  for (const auto& [name, dims] : options.shapes) {
    bool known = false;
    for (const TensorMetadata& input : metadata.inputs) known = known || input.name == name;
    if (!known) return InvalidArgument("--shape names '" + name + "', which is not an input of the model");
  }
  bool batched = false;
  if (options.max_batch_size) {
    batched = *options.max_batch_size > 0;
  } else {
    batched = !metadata.inputs.empty();
    for (const TensorMetadata& input : metadata.inputs)
      batched = batched && !input.shape.empty() && input.shape[0] == -1;
  }
  if (!batched && options.batch_size != 1) {
    return InvalidArgument("model '" + metadata.name + "' does not batch (max_batch_size 0): --batch-size must be 1");
  }
  if (batched && options.max_batch_size && options.batch_size > *options.max_batch_size) {
    return InvalidArgument("--batch-size " + std::to_string(options.batch_size) +
                           " exceeds the model's max_batch_size " + std::to_string(*options.max_batch_size));
  }

  std::vector<std::vector<int64_t>> shapes;
  for (const TensorMetadata& input : metadata.inputs) {
    std::vector<int64_t> shape = input.shape;
    size_t first = 0;  // first dim that is not the batch dim
    if (batched) {
      if (shape.empty()) return InvalidArgument("input '" + input.name + "' of a batching model has no batch dim");
      shape[0] = options.batch_size;
      first = 1;
    }
    if (auto given = options.shapes.find(input.name); given != options.shapes.end()) {
      if (given->second.size() != shape.size() - first) {
        return InvalidArgument("--shape " + input.name + " has " + std::to_string(given->second.size()) +
                               " dims, the input has " + std::to_string(shape.size() - first) +
                               (batched ? " besides the batch dim" : "") + ": " + ShapeText(input.shape));
      }
      for (size_t i = first; i < shape.size(); ++i) {
        int64_t want = given->second[i - first];
        if (shape[i] != -1 && shape[i] != want) {
          return InvalidArgument("--shape " + input.name + " contradicts the fixed dims of " + ShapeText(input.shape));
        }
        shape[i] = want;
      }
    }
    for (size_t i = first; i < shape.size(); ++i) {
      if (shape[i] == -1) {
        return InvalidArgument("input '" + input.name + "' has variable dims " + ShapeText(input.shape) +
                               ": give them with --shape " + input.name + ":d1,d2,..." +
                               (batched ? " (without the batch dim)" : ""));
      }
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

Result<std::vector<GeneratedInput>> GenerateInputs(const ModelMetadata& metadata,
                                                   const InputGenerationOptions& options) {
  WEFT_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> shapes, ResolveInputShapes(metadata, options));
  DeterministicRandom random(options.seed);
  std::vector<GeneratedInput> inputs;
  // The server's metadata may list any number of inputs: the bound holds for all of them together, not each alone.
  int64_t total_bytes = 0;
  for (size_t i = 0; i < metadata.inputs.size(); ++i) {
    GeneratedInput input{.name = metadata.inputs[i].name, .datatype = metadata.inputs[i].datatype, .shape = shapes[i]};
    int64_t element_bytes = input.datatype == DataType::kBytes ? 4 + options.string_length
                                                               : static_cast<int64_t>(DataTypeSize(input.datatype));
    int64_t bytes = element_bytes;
    for (int64_t d : input.shape) {
      if (d != 0 && bytes > kMaxInputBytes / d) {
        return InvalidArgument("input '" + input.name + "' of shape " + ShapeText(input.shape) + " exceeds 2 GiB");
      }
      bytes *= d;
    }
    if (bytes > kMaxInputBytes - total_bytes) {
      return InvalidArgument("the model's inputs together exceed 2 GiB (at input '" + input.name + "')");
    }
    total_bytes += bytes;
    input.data.reserve(static_cast<size_t>(bytes));
    AppendRandomElements(input.datatype, input.element_count(), options.string_length, &random, &input.data);
    inputs.push_back(std::move(input));
  }
  return inputs;
}

float HalfBitsToFloat(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  float magnitude = exponent == 0    ? std::ldexp(static_cast<float>(mantissa), -24)
                    : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                     : std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

}  // namespace weft
