#include "scheduler/batch_tensors.h"

#include <cstring>
#include <memory>
#include <numeric>

#include "base/log.h"

namespace weft {
namespace {

template <typename T>
void AppendRaw(std::string* key, T value) {
  key->append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// Byte offsets of the element boundaries of a serialized BYTES tensor: offsets[i] is where element i starts,
// offsets[count] is the end. nullopt when the length prefixes run past the end.
std::optional<std::vector<size_t>> BytesElementOffsets(std::span<const std::byte> bytes, int64_t count) {
  if (count < 0 || static_cast<uint64_t>(count) > bytes.size() / 4) return std::nullopt;
  std::vector<size_t> offsets;
  offsets.reserve(static_cast<size_t>(count) + 1);
  size_t at = 0;
  for (int64_t i = 0; i < count; ++i) {
    offsets.push_back(at);
    if (bytes.size() - at < 4) return std::nullopt;
    uint32_t length = 0;
    for (int b = 3; b >= 0; --b) length = (length << 8) | static_cast<uint32_t>(bytes[at + b]);
    at += 4;
    if (bytes.size() - at < length) return std::nullopt;
    at += length;
  }
  offsets.push_back(at);
  return offsets;
}

}  // namespace

std::optional<std::string> BatchKeyOf(const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) {
    if (t.shape().empty() || t.place().kind != MemoryKind::kCpu) return std::nullopt;
    AppendRaw(&key, t.type());
    AppendRaw(&key, t.shape().size());
    for (size_t d = 1; d < t.shape().size(); ++d) AppendRaw(&key, t.shape()[d]);
  }
  return key;
}

std::vector<Tensor> JoinInputs(std::span<const std::vector<Tensor>* const> requests) {
  WEFT_CHECK(!requests.empty()) << "an empty batch";
  if (requests.size() == 1) return *requests[0];
  const size_t input_count = requests[0]->size();
  std::vector<Tensor> joined;
  joined.reserve(input_count);
  for (size_t i = 0; i < input_count; ++i) {
    const Tensor& first = (*requests[0])[i];
    Shape shape = first.shape();
    shape[0] = 0;
    size_t bytes = 0;
    for (const auto* r : requests) {
      shape[0] += (*r)[i].shape()[0];
      bytes += (*r)[i].byte_size();
    }
    // Uninitialized on purpose: every byte is written below.
    std::shared_ptr<std::byte> storage(new std::byte[bytes], std::default_delete<std::byte[]>());
    size_t at = 0;
    for (const auto* r : requests) {
      const Tensor& part = (*r)[i];
      if (part.byte_size() > 0) std::memcpy(storage.get() + at, part.data(), part.byte_size());
      at += part.byte_size();
    }
    const std::byte* data = storage.get();
    joined.emplace_back(first.name(), first.type(), std::move(shape), std::move(storage), data, bytes, first.place());
  }
  return joined;
}

Result<std::vector<std::vector<Tensor>>> SplitOutputs(const std::vector<Tensor>& outputs,
                                                      std::span<const int64_t> batch_sizes) {
  const int64_t total = std::accumulate(batch_sizes.begin(), batch_sizes.end(), int64_t{0});
  std::vector<std::vector<Tensor>> parts(batch_sizes.size());
  for (auto& p : parts) p.reserve(outputs.size());
  for (const Tensor& out : outputs) {
    if (out.shape().empty() || out.shape()[0] != total) {
      return Internal("output '" + out.name() + "' has shape " + ShapeToString(out.shape()) + "; a batch of " +
                      std::to_string(total) + " needs it to start with " + std::to_string(total));
    }
    const int64_t elements = out.element_count();
    if (elements < 0 || (total > 0 && elements % total != 0)) {
      return Internal("output '" + out.name() + "': cannot split shape " + ShapeToString(out.shape()));
    }
    const int64_t per_item = total > 0 ? elements / total : 0;
    std::optional<std::vector<size_t>> offsets;
    if (out.type() == DataType::kBytes) {
      offsets = BytesElementOffsets(out.bytes(), elements);
      if (!offsets) return Internal("output '" + out.name() + "': malformed BYTES elements");
    } else if (Result<size_t> size = TensorByteSize(out.type(), out.shape()); !size.ok() || out.byte_size() != *size) {
      return Internal("output '" + out.name() + "': " + std::to_string(out.byte_size()) + " bytes for shape " +
                      ShapeToString(out.shape()));
    }
    int64_t item = 0;
    for (size_t r = 0; r < batch_sizes.size(); ++r) {
      const int64_t first = item * per_item;
      const int64_t last = (item + batch_sizes[r]) * per_item;
      size_t begin, end;
      if (offsets) {
        begin = (*offsets)[first];
        end = (*offsets)[last];
      } else {
        begin = static_cast<size_t>(first) * DataTypeSize(out.type());
        end = static_cast<size_t>(last) * DataTypeSize(out.type());
      }
      Shape shape = out.shape();
      shape[0] = batch_sizes[r];
      parts[r].emplace_back(out.name(), out.type(), std::move(shape), out.owner(), out.data() + begin, end - begin,
                            out.place());
      item += batch_sizes[r];
    }
  }
  return parts;
}

}  // namespace weft
