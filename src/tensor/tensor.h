#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/small_vector.h"
#include "tensor/data_type.h"

namespace weft {

// Dimensions, held inline up to rank 6: a shape is copied with every tensor, and as a std::vector each copy (of
// the request's shape, the model's, the batch's) was an allocation, about a dozen per request.
using Shape = boost::container::small_vector<int64_t, 6>;

// The most dimensions a request's tensor may have (PyTorch allows 64 too). A client's shape is copied with its
// tensor and printed in messages: without a bound, one message of tens of millions of dims costs gigabytes.
inline constexpr size_t kMaxTensorRank = 64;

// Number of elements of a shape; -1 if a dimension is negative or the product overflows.
int64_t ElementCount(const Shape& shape);
// Bytes of a tensor of a fixed-size `type` and `shape` (the element count times the element size).
// InvalidArgument when a dimension is negative or either product overflows; BYTES and kInvalid have no fixed size
// (InvalidArgument too).
Result<size_t> TensorByteSize(DataType type, const Shape& shape);
std::string ShapeToString(const Shape& shape);

enum class MemoryKind : uint8_t { kCpu, kCpuPinned, kGpu };

// Where a tensor's bytes live. Every buffer says so, so that no code guesses.
struct MemoryPlace {
  MemoryKind kind = MemoryKind::kCpu;
  int device_id = 0;
};

// A named, typed, shaped view of bytes that it keeps alive. Copying a Tensor copies the view, never the bytes:
// a tensor built over a request body shares ownership of that body (zero-copy), and a backend output owns its
// storage through the same handle. Thread-compatible; the bytes are immutable once the tensor is shared.
class Tensor {
 public:
  Tensor() = default;
  // `owner` keeps `data` alive; `data` points to `byte_size` bytes.
  Tensor(std::string name, DataType type, Shape shape, std::shared_ptr<const void> owner, const std::byte* data,
         size_t byte_size, MemoryPlace place = {});

  // Allocates zeroed CPU storage for a fixed-size type. Returns the tensor and a writable pointer into it.
  // The size must fit (TensorByteSize succeeds): a shape from a client is checked, and bounded, before this.
  static Tensor Allocate(std::string name, DataType type, Shape shape, std::byte** writable);
  // Takes ownership of `bytes` (for BYTES tensors and outputs that were built in a buffer).
  static Tensor FromBytes(std::string name, DataType type, Shape shape, std::vector<std::byte> bytes);

  const std::string& name() const { return name_; }
  DataType type() const { return type_; }
  const Shape& shape() const { return shape_; }
  const std::byte* data() const { return data_; }
  size_t byte_size() const { return byte_size_; }
  MemoryPlace place() const { return place_; }
  std::span<const std::byte> bytes() const { return {data_, byte_size_}; }
  const std::shared_ptr<const void>& owner() const { return owner_; }
  int64_t element_count() const { return ElementCount(shape_); }

  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data_), byte_size_ / sizeof(T)};
  }

  void set_name(std::string name) { name_ = std::move(name); }
  // Same bytes, other shape. The caller checks that the element count matches.
  Tensor Reshaped(Shape shape) const;

 private:
  std::string name_;
  DataType type_ = DataType::kInvalid;
  Shape shape_;
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t byte_size_ = 0;
  MemoryPlace place_;
};

// Checks that `byte_size` is right for `type` and `shape`. For BYTES it walks the 4-byte little-endian length
// prefixes and requires exactly element_count elements that end at the end of the buffer.
Status ValidateTensorBytes(DataType type, const Shape& shape, std::span<const std::byte> bytes);

// Splits a serialized BYTES tensor into its elements (views into `bytes`). The input must be valid.
std::vector<std::string_view> SplitBytesElements(std::span<const std::byte> bytes);
// Serializes strings as 4-byte little-endian length + bytes each.
std::vector<std::byte> JoinBytesElements(std::span<const std::string> elements);

}  // namespace weft
