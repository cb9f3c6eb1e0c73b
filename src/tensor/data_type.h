#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

// Every datatype of the Open Inference Protocol. BYTES elements are variable length.
enum class DataType : uint8_t {
  kInvalid = 0,
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kFp32,
  kFp64,
  kBytes,
  kBf16,
};

// Protocol names: "BOOL", "UINT8", ..., "BYTES". Returns nullopt for an unknown name (case-sensitive).
std::optional<DataType> DataTypeFromName(std::string_view name);
std::string_view DataTypeName(DataType type);
// Triton config names: "TYPE_FP32", "TYPE_STRING" (= BYTES), ...
std::optional<DataType> DataTypeFromConfigName(std::string_view name);
std::string_view DataTypeConfigName(DataType type);
// Bytes per element; 0 for BYTES and kInvalid.
size_t DataTypeSize(DataType type);

}  // namespace weft
