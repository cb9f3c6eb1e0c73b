#include "rollout/output_compare.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <concepts>
#include <cstring>
#include <limits>
#include <type_traits>

namespace weft {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Difference {
  double abs = 0;
  double rel = 0;
};

// Buffers may sit anywhere in a request or response body, so elements are read without assuming alignment.
template <typename T>
T Load(const std::byte* data, size_t index) {
  T value;
  std::memcpy(&value, data + index * sizeof(T), sizeof(T));
  return value;
}

// FP16 and BF16 are decoded here rather than with frontend/http/float16.h: rollout/ must not depend on a frontend.
double HalfToDouble(uint16_t bits) {
  const double sign = (bits & 0x8000u) != 0 ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) return mantissa == 0 ? sign * kInfinity : std::numeric_limits<double>::quiet_NaN();
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);  // subnormal (or zero)
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

double Bfloat16ToDouble(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

Difference FloatDifference(double primary, double candidate) {
  if (primary == candidate) return {};  // also equal infinities, whose difference would be NaN
  const bool primary_nan = std::isnan(primary);
  const bool candidate_nan = std::isnan(candidate);
  if (primary_nan && candidate_nan) return {};
  const double abs = primary_nan || candidate_nan ? kInfinity : std::fabs(candidate - primary);
  if (std::isinf(abs)) return {kInfinity, kInfinity};  // inf / inf would be NaN
  return {abs, primary == 0 ? kInfinity : abs / std::fabs(primary)};
}

// Exact for 64-bit integers too, whose difference as doubles could round to 0.
template <std::integral T>
Difference IntegerDifference(T primary, T candidate) {
  if (primary == candidate) return {};
  using U = std::make_unsigned_t<T>;
  const auto gap = primary < candidate ? static_cast<U>(static_cast<U>(candidate) - static_cast<U>(primary))
                                       : static_cast<U>(static_cast<U>(primary) - static_cast<U>(candidate));
  const double abs = static_cast<double>(gap);
  return {abs, primary == 0 ? kInfinity : abs / std::fabs(static_cast<double>(primary))};
}

void Merge(const Difference& d, Comparison* out) {
  out->max_abs = std::max(out->max_abs, d.abs);
  out->max_rel = std::max(out->max_rel, d.rel);
}

// Whether `a` ranks above `b` for an arg max: NaN ranks above every number (as numpy's and torch's argmax have it).
bool RanksAbove(double a, double b) {
  if (std::isnan(b)) return false;
  return std::isnan(a) || a > b;
}

// The index in [begin, begin + count) of the row's largest value; the first one wins a tie.
template <typename Decode>
size_t ArgMax(const std::byte* data, size_t begin, size_t count, Decode decode) {
  size_t best = begin;
  double best_value = decode(data, begin);
  for (size_t i = begin + 1; i < begin + count; ++i) {
    const double value = decode(data, i);
    if (RanksAbove(value, best_value)) {
      best = i;
      best_value = value;
    }
  }
  return best - begin;
}

void CompareTop1(const Tensor& primary, const Tensor& candidate, size_t elements, auto decode, Comparison* out) {
  const Shape& shape = primary.shape();
  if (shape.empty() || shape.back() < 2 || elements == 0) return;
  const auto row_size = static_cast<size_t>(shape.back());
  const size_t rows = elements / row_size;
  for (size_t row = 0; row < rows; ++row) {
    const size_t begin = row * row_size;
    const bool agree =
        ArgMax(primary.data(), begin, row_size, decode) == ArgMax(candidate.data(), begin, row_size, decode);
    ++out->top1_rows;
    out->top1_agree += agree ? 1 : 0;
  }
}

// `decode(data, index)` reads one element as a double.
void CompareFloating(const Tensor& primary, const Tensor& candidate, size_t elements, auto decode, Comparison* out) {
  for (size_t i = 0; i < elements; ++i) {
    Merge(FloatDifference(decode(primary.data(), i), decode(candidate.data(), i)), out);
  }
  CompareTop1(primary, candidate, elements, decode, out);
}

template <std::integral T>
void CompareIntegers(const Tensor& primary, const Tensor& candidate, size_t elements, Comparison* out) {
  for (size_t i = 0; i < elements; ++i) {
    Merge(IntegerDifference(Load<T>(primary.data(), i), Load<T>(candidate.data(), i)), out);
  }
}

void CompareBools(const Tensor& primary, const Tensor& candidate, size_t elements, Comparison* out) {
  for (size_t i = 0; i < elements; ++i) {
    // Any non-zero byte is true.
    const bool p = Load<uint8_t>(primary.data(), i) != 0;
    const bool c = Load<uint8_t>(candidate.data(), i) != 0;
    Merge(IntegerDifference<int>(p ? 1 : 0, c ? 1 : 0), out);
  }
}

// Compares the elements of two host tensors of one numeric `type` and `elements` elements each. False for a
// type that is not numeric.
bool CompareNumeric(const Tensor& primary, const Tensor& candidate, size_t elements, Comparison* out) {
  switch (primary.type()) {
    case DataType::kBool: CompareBools(primary, candidate, elements, out); return true;
    case DataType::kUint8: CompareIntegers<uint8_t>(primary, candidate, elements, out); return true;
    case DataType::kUint16: CompareIntegers<uint16_t>(primary, candidate, elements, out); return true;
    case DataType::kUint32: CompareIntegers<uint32_t>(primary, candidate, elements, out); return true;
    case DataType::kUint64: CompareIntegers<uint64_t>(primary, candidate, elements, out); return true;
    case DataType::kInt8: CompareIntegers<int8_t>(primary, candidate, elements, out); return true;
    case DataType::kInt16: CompareIntegers<int16_t>(primary, candidate, elements, out); return true;
    case DataType::kInt32: CompareIntegers<int32_t>(primary, candidate, elements, out); return true;
    case DataType::kInt64: CompareIntegers<int64_t>(primary, candidate, elements, out); return true;
    case DataType::kFp16:
      CompareFloating(
          primary, candidate, elements, [](const std::byte* d, size_t i) { return HalfToDouble(Load<uint16_t>(d, i)); },
          out);
      return true;
    case DataType::kBf16:
      CompareFloating(
          primary, candidate, elements,
          [](const std::byte* d, size_t i) { return Bfloat16ToDouble(Load<uint16_t>(d, i)); }, out);
      return true;
    case DataType::kFp32:
      CompareFloating(
          primary, candidate, elements,
          [](const std::byte* d, size_t i) { return static_cast<double>(Load<float>(d, i)); }, out);
      return true;
    case DataType::kFp64:
      CompareFloating(
          primary, candidate, elements, [](const std::byte* d, size_t i) { return Load<double>(d, i); }, out);
      return true;
    case DataType::kBytes:
    case DataType::kInvalid: return false;
  }
  return false;
}

bool OnHost(const Tensor& tensor) { return tensor.place().kind != MemoryKind::kGpu; }

// Compares two outputs of one name. A type or shape that differs is a mismatch even for GPU outputs: it needs no
// access to their bytes.
void CompareOutput(const Tensor& primary, const Tensor& candidate, Comparison* out) {
  if (primary.type() != candidate.type() || primary.shape() != candidate.shape()) {
    out->mismatch = true;
    return;
  }
  if (!OnHost(primary) || !OnHost(candidate)) return;
  if (DataTypeSize(primary.type()) == 0) {  // BYTES, or a type without numbers: equal bytes or nothing
    const auto p = primary.bytes();
    const auto c = candidate.bytes();
    if (!std::equal(p.begin(), p.end(), c.begin(), c.end())) out->mismatch = true;
    out->compared = true;
    return;
  }
  // A buffer of the wrong size is not read past its end; the answers cannot be compared.
  Result<size_t> expected = TensorByteSize(primary.type(), primary.shape());
  if (!expected.ok() || primary.byte_size() != *expected || candidate.byte_size() != *expected) {
    out->mismatch = true;
    return;
  }
  const size_t elements = *expected / DataTypeSize(primary.type());
  if (CompareNumeric(primary, candidate, elements, out)) out->compared = true;
}

const Tensor* FindByName(std::span<const Tensor> outputs, const std::string& name) {
  for (const Tensor& t : outputs) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

}  // namespace

Comparison CompareOutputs(std::span<const Tensor> primary, std::span<const Tensor> candidate) {
  Comparison out;
  for (const Tensor& p : primary) {
    const Tensor* c = FindByName(candidate, p.name());
    if (c == nullptr) {
      out.mismatch = true;
      continue;
    }
    CompareOutput(p, *c, &out);
  }
  for (const Tensor& c : candidate) {
    if (FindByName(primary, c.name()) == nullptr) out.mismatch = true;
  }
  return out;
}

}  // namespace weft
