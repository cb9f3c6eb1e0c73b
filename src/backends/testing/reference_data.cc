#include "backends/testing/reference_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

namespace weft::examples {

std::filesystem::path SourceDir() {
  const char* dir = std::getenv("WEFT_SOURCE_DIR");
  return dir && *dir ? std::filesystem::path(dir) : std::filesystem::current_path();
}

std::filesystem::path VersionDir(const std::string& model, int version) {
  return SourceDir() / "examples" / "models" / model / std::to_string(version);
}

Result<Tensor> ReadReference(const std::string& model, const std::string& kind, const std::string& name, DataType type,
                             Shape shape) {
  auto path = SourceDir() / "examples" / "reference" / model / (kind + "." + name + ".bin");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound("cannot read " + path.string() + "; generate it with: /usr/bin/python3 examples/make_models.py");
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> data(bytes.size());
  std::memcpy(data.data(), bytes.data(), bytes.size());
  WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, shape, data).WithContext(path.string()));
  return Tensor::FromBytes(name, type, std::move(shape), std::move(data));
}

float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.byte_size() != b.byte_size()) return std::numeric_limits<float>::infinity();
  float worst = 0;
  for (size_t i = 0; i < a.byte_size() / sizeof(float); ++i) {
    float x, y;
    std::memcpy(&x, a.data() + i * sizeof(float), sizeof(float));
    std::memcpy(&y, b.data() + i * sizeof(float), sizeof(float));
    float diff = std::fabs(x - y);
    if (std::isnan(diff)) return std::numeric_limits<float>::infinity();
    worst = std::max(worst, diff);
  }
  return worst;
}

}  // namespace weft::examples
