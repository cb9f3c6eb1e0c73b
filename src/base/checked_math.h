#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>

namespace weft {

// Size and count arithmetic on values that come from clients and files. Every product or sum of such values is
// computed here, so that an overflow becomes nullopt (and then a clear error) instead of a small wrapped number
// that passes a bounds check: a shape of [2^62 + 2] FP32 elements "needs" 4 * (2^62 + 2) = 8 bytes in uint64.

// a * b and a + b, or nullopt when the result does not fit in T.
template <std::integral T>
std::optional<T> CheckedMul(T a, T b) {
  T out;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}
template <std::integral T>
std::optional<T> CheckedAdd(T a, T b) {
  T out;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The product of non-negative factors, or nullopt when one is negative or the product exceeds int64.
inline std::optional<int64_t> CheckedProduct(std::span<const int64_t> factors) {
  int64_t out = 1;
  for (int64_t f : factors) {
    if (f < 0) return std::nullopt;
    std::optional<int64_t> next = CheckedMul(out, f);
    if (!next) return std::nullopt;
    out = *next;
  }
  return out;
}

}  // namespace weft
