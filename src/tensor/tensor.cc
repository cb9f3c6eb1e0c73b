#include "tensor/tensor.h"

#include <cstring>
#include <limits>
#include <new>

#include "base/checked_math.h"
#include "base/large_buffer.h"
#include "base/log.h"

namespace weft {

int64_t ElementCount(const Shape& shape) { return CheckedProduct(shape).value_or(-1); }

Result<size_t> TensorByteSize(DataType type, const Shape& shape) {
  const size_t element = DataTypeSize(type);
  if (element == 0) return InvalidArgument("datatype " + std::string(DataTypeName(type)) + " has no fixed size");
  int64_t count = ElementCount(shape);
  if (count < 0) return InvalidArgument("shape " + ShapeToString(shape) + " has a negative or too large dimension");
  std::optional<uint64_t> bytes = CheckedMul(static_cast<uint64_t>(count), element);
  if (!bytes || *bytes > std::numeric_limits<size_t>::max()) {
    return InvalidArgument("a " + std::string(DataTypeName(type)) + " tensor of shape " + ShapeToString(shape) +
                           " would be larger than 2^64 bytes");
  }
  return static_cast<size_t>(*bytes);
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Tensor::Tensor(std::string name, DataType type, Shape shape, std::shared_ptr<const void> owner, const std::byte* data,
               size_t byte_size, MemoryPlace place)
    : name_(std::move(name)),
      type_(type),
      shape_(std::move(shape)),
      owner_(std::move(owner)),
      data_(data),
      byte_size_(byte_size),
      place_(place) {}

Tensor Tensor::Allocate(std::string name, DataType type, Shape shape, std::byte** writable) {
  Result<size_t> checked = TensorByteSize(type, shape);
  WEFT_CHECK(checked.ok()) << "Tensor::Allocate of '" << name << "': " << checked.status().message();
  const size_t size = *checked;
  if (size >= kLargeBufferBytes) {
    // Mapped on its own, and given back in slices when the last view goes (base/large_buffer.h).
    auto* mapped = static_cast<std::byte*>(MapLargeBuffer(size));
    if (mapped == nullptr) throw std::bad_alloc();
    std::shared_ptr<const void> storage(mapped,
                                        [size](const void* p) { UnmapLargeBuffer(const_cast<void*>(p), size); });
    *writable = mapped;
    return Tensor(std::move(name), type, std::move(shape), std::move(storage), mapped, size);
  }
  auto storage = std::make_shared<std::vector<std::byte>>(size);
  *writable = storage->data();
  const std::byte* data = storage->data();
  return Tensor(std::move(name), type, std::move(shape), std::move(storage), data, size);
}

Tensor Tensor::FromBytes(std::string name, DataType type, Shape shape, std::vector<std::byte> bytes) {
  auto storage = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  const std::byte* data = storage->data();
  size_t size = storage->size();
  return Tensor(std::move(name), type, std::move(shape), std::move(storage), data, size);
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Status ValidateTensorBytes(DataType type, const Shape& shape, std::span<const std::byte> bytes) {
  int64_t count = ElementCount(shape);
  if (count < 0) return InvalidArgument("invalid shape " + ShapeToString(shape));
  if (type == DataType::kBytes) {
    size_t offset = 0;
    int64_t elements = 0;
    while (offset < bytes.size()) {
      if (bytes.size() - offset < 4) return InvalidArgument("BYTES tensor has a truncated length prefix");
      uint32_t len;
      std::memcpy(&len, bytes.data() + offset, 4);
      offset += 4;
      if (bytes.size() - offset < len) return InvalidArgument("BYTES tensor element overruns its data");
      offset += len;
      ++elements;
    }
    if (elements != count) {
      return InvalidArgument("BYTES tensor has " + std::to_string(elements) + " elements, shape " +
                             ShapeToString(shape) + " needs " + std::to_string(count));
    }
    return Status::Ok();
  }
  WEFT_ASSIGN_OR_RETURN(size_t expected, TensorByteSize(type, shape));
  if (bytes.size() != expected) {
    return InvalidArgument("tensor of type " + std::string(DataTypeName(type)) + " and shape " + ShapeToString(shape) +
                           " needs " + std::to_string(expected) + " bytes, got " + std::to_string(bytes.size()));
  }
  return Status::Ok();
}

std::vector<std::string_view> SplitBytesElements(std::span<const std::byte> bytes) {
  std::vector<std::string_view> out;
  size_t offset = 0;
  while (offset + 4 <= bytes.size()) {
    uint32_t len;
    std::memcpy(&len, bytes.data() + offset, 4);
    offset += 4;
    out.emplace_back(reinterpret_cast<const char*>(bytes.data() + offset), len);
    offset += len;
  }
  return out;
}

std::vector<std::byte> JoinBytesElements(std::span<const std::string> elements) {
  size_t total = 0;
  for (const auto& e : elements) total += 4 + e.size();
  std::vector<std::byte> out(total);
  size_t offset = 0;
  for (const auto& e : elements) {
    uint32_t len = static_cast<uint32_t>(e.size());
    std::memcpy(out.data() + offset, &len, 4);
    std::memcpy(out.data() + offset + 4, e.data(), e.size());
    offset += 4 + e.size();
  }
  return out;
}

}  // namespace weft
