#include "model/classification.h"

#include <algorithm>
#include <numeric>
#include <string_view>
#include <system_error>

#include "base/small_file.h"

namespace weft {
namespace {

template <typename T>
void AppendTopClasses(std::span<const T> entry, size_t count, const std::vector<std::string>& labels,
                      std::vector<std::string>* out) {
  std::vector<size_t> order(entry.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Only the first `count` places matter; stable among equals so that the same values always answer the same.
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count), order.end(),
                    [&](size_t a, size_t b) { return entry[a] > entry[b] || (entry[a] == entry[b] && a < b); });
  for (size_t k = 0; k < count; ++k) {
    const size_t index = order[k];
    std::string text = std::to_string(entry[index]) + ":" + std::to_string(index);
    if (index < labels.size() && !labels[index].empty()) text += ":" + labels[index];
    out->push_back(std::move(text));
  }
}

template <typename T>
void ClassifyAll(const Tensor& output, size_t entries, size_t classes, size_t count,
                 const std::vector<std::string>& labels, std::vector<std::string>* out) {
  std::span<const T> values = output.as<T>();
  for (size_t b = 0; b < entries; ++b) AppendTopClasses(values.subspan(b * classes, classes), count, labels, out);
}

}  // namespace

bool IsClassifiable(DataType type) {
  switch (type) {
    case DataType::kUint8:
    case DataType::kUint16:
    case DataType::kUint32:
    case DataType::kUint64:
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFp32:
    case DataType::kFp64: return true;
    default: return false;
  }
}

Result<Tensor> Classify(const Tensor& output, uint32_t class_count, bool batched,
                        const std::vector<std::string>& labels) {
  const std::string what = "output '" + output.name() + "'";
  if (!IsClassifiable(output.type())) {
    return InvalidArgument(what + ": classification needs an integer or FP32/FP64 output, not " +
                           std::string(DataTypeName(output.type())));
  }
  if (output.place().kind == MemoryKind::kGpu) return Internal(what + ": classification of GPU memory");
  const int64_t elements = output.element_count();
  if (elements < 0 || static_cast<size_t>(elements) * DataTypeSize(output.type()) != output.byte_size()) {
    return Internal(what + ": its bytes do not match its shape");
  }
  int64_t entries = 1;
  if (batched) {
    if (output.shape().empty()) return InvalidArgument(what + ": a batching model's output has no batch dimension");
    entries = output.shape()[0];
  }
  const int64_t classes = entries > 0 ? elements / entries : 0;
  const auto count = static_cast<size_t>(std::min<int64_t>(class_count, classes));
  std::vector<std::string> strings;
  // count <= classes, so entries * count <= elements: no overflow.
  strings.reserve(static_cast<size_t>(entries) * count);
  const auto n = static_cast<size_t>(entries);
  const auto c = static_cast<size_t>(classes);
  switch (output.type()) {
    case DataType::kUint8: ClassifyAll<uint8_t>(output, n, c, count, labels, &strings); break;
    case DataType::kUint16: ClassifyAll<uint16_t>(output, n, c, count, labels, &strings); break;
    case DataType::kUint32: ClassifyAll<uint32_t>(output, n, c, count, labels, &strings); break;
    case DataType::kUint64: ClassifyAll<uint64_t>(output, n, c, count, labels, &strings); break;
    case DataType::kInt8: ClassifyAll<int8_t>(output, n, c, count, labels, &strings); break;
    case DataType::kInt16: ClassifyAll<int16_t>(output, n, c, count, labels, &strings); break;
    case DataType::kInt32: ClassifyAll<int32_t>(output, n, c, count, labels, &strings); break;
    case DataType::kInt64: ClassifyAll<int64_t>(output, n, c, count, labels, &strings); break;
    case DataType::kFp32: ClassifyAll<float>(output, n, c, count, labels, &strings); break;
    case DataType::kFp64: ClassifyAll<double>(output, n, c, count, labels, &strings); break;
    default: break;
  }
  Shape shape;
  if (batched) shape.push_back(entries);
  shape.push_back(static_cast<int64_t>(count));
  return Tensor::FromBytes(output.name(), DataType::kBytes, std::move(shape), JoinBytesElements(strings));
}

Result<std::vector<std::string>> ReadLabelFile(const std::filesystem::path& file) {
  Result<std::string> text = ReadSmallFile(file, kMaxLabelFileBytes);
  if (!text.ok()) {
    return Status(text.status().code(), file.string() + ": cannot read the label file: " + text.status().message());
  }
  std::vector<std::string> labels;
  std::string_view rest = *text;
  while (!rest.empty()) {
    // Each label is a string of its own: a file of empty lines would cost 32 bytes per byte without a bound.
    if (labels.size() == kMaxLabels) {
      return InvalidArgument(file.string() + ": the label file has more than " + std::to_string(kMaxLabels) + " lines");
    }
    const size_t end = rest.find('\n');
    std::string_view line = rest.substr(0, end);
    if (line.ends_with('\r')) line.remove_suffix(1);
    labels.emplace_back(line);
    rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
  }
  return labels;
}

}  // namespace weft
