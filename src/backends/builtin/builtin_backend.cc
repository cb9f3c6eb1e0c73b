#include "backends/builtin/builtin_backend.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>

#include "backends/builtin/fault_model.h"
#include "backends/builtin/stateful_models.h"
#include "backends/common/model_checks.h"

namespace weft {
namespace {

enum class BuiltinModel { kIdentity, kAddSub, kSleep, kCounter, kGpuSpin, kAffine, kFault };

Result<BuiltinModel> ModelOf(const ModelConfig& config) {
  std::string name = config.Parameter("builtin");
  if (name == "identity") return BuiltinModel::kIdentity;
  if (name == "add_sub") return BuiltinModel::kAddSub;
  if (name == "sleep") return BuiltinModel::kSleep;
  if (name == "counter") return BuiltinModel::kCounter;
  if (name == "gpu_spin") return BuiltinModel::kGpuSpin;
  if (name == "affine") return BuiltinModel::kAffine;
  if (name == "fault") return BuiltinModel::kFault;
  constexpr char kKnown[] = "identity, add_sub, sleep, counter, gpu_spin, affine or fault";
  if (name.empty()) return InvalidArgument(std::string("parameters 'builtin': missing; expected ") + kKnown);
  return InvalidArgument(std::string("parameters 'builtin': expected ") + kKnown + ", got '" + name + "'");
}

// Output i is input i, renamed: the same bytes and owner, so nothing is copied. The sleep model adds a delay.
class IdentityInstance : public ModelInstance {
 public:
  IdentityInstance(ModelConfig config, std::chrono::microseconds batch_delay, std::chrono::microseconds item_delay)
      : config_(std::move(config)), batch_delay_(batch_delay), item_delay_(item_delay) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    auto delay = batch_delay_ + item_delay_ * BatchSize(config_, inputs);
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::vector<Tensor> outputs;
    outputs.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      outputs.push_back(inputs[i]);
      outputs.back().set_name(config_.outputs[i].name);
    }
    return outputs;
  }

 private:
  const ModelConfig config_;
  const std::chrono::microseconds batch_delay_;
  const std::chrono::microseconds item_delay_;
};

template <typename T>
void AddSub(const Tensor& a, const Tensor& b, std::byte* sum, std::byte* difference) {
  // Outputs are fresh allocations from Tensor::Allocate, aligned for T.
  T* s = reinterpret_cast<T*>(sum);
  T* d = reinterpret_cast<T*>(difference);
  size_t count = a.byte_size() / sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    // Inputs may sit at any offset of a request body, so read them without assuming alignment.
    T x, y;
    std::memcpy(&x, a.data() + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b.data() + i * sizeof(T), sizeof(T));
    if constexpr (std::is_integral_v<T>) {
      // Integers wrap around, as in the frameworks, instead of overflowing (undefined for signed types).
      using U = std::make_unsigned_t<T>;
      s[i] = static_cast<T>(static_cast<U>(x) + static_cast<U>(y));
      d[i] = static_cast<T>(static_cast<U>(x) - static_cast<U>(y));
    } else {
      s[i] = x + y;
      d[i] = x - y;
    }
  }
}

struct AddSubLayout {
  size_t a = 0, b = 1;             // positions of INPUT0 and INPUT1 among the inputs
  size_t sum = 0, difference = 1;  // positions of OUTPUT0 and OUTPUT1 among the outputs
};

class AddSubInstance : public ModelInstance {
 public:
  AddSubInstance(ModelConfig config, AddSubLayout layout) : config_(std::move(config)), layout_(layout) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    const Tensor& a = inputs[layout_.a];
    const Tensor& b = inputs[layout_.b];
    if (a.shape() != b.shape()) {
      return InvalidArgument("INPUT0 and INPUT1 must have the same shape, got " + ShapeToString(a.shape()) + " and " +
                             ShapeToString(b.shape()));
    }
    std::byte* sum = nullptr;
    std::byte* difference = nullptr;
    std::vector<Tensor> outputs(2);
    outputs[layout_.sum] = Tensor::Allocate(config_.outputs[layout_.sum].name, a.type(), a.shape(), &sum);
    outputs[layout_.difference] =
        Tensor::Allocate(config_.outputs[layout_.difference].name, a.type(), a.shape(), &difference);
    switch (a.type()) {
      case DataType::kFp32: AddSub<float>(a, b, sum, difference); break;
      case DataType::kFp64: AddSub<double>(a, b, sum, difference); break;
      case DataType::kInt32: AddSub<int32_t>(a, b, sum, difference); break;
      case DataType::kInt64: AddSub<int64_t>(a, b, sum, difference); break;
      default: return Internal("add_sub: datatype " + std::string(DataTypeName(a.type())) + " passed Validate");
    }
    return outputs;
  }

 private:
  const ModelConfig config_;
  const AddSubLayout layout_;
};

Status ValidateIdentity(const ModelConfig& config) {
  if (config.outputs.size() != config.inputs.size()) {
    return InvalidArgument("builtin identity: needs as many outputs as inputs, has " +
                           std::to_string(config.inputs.size()) + " inputs and " +
                           std::to_string(config.outputs.size()) + " outputs");
  }
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    if (config.inputs[i].data_type != config.outputs[i].data_type) {
      return InvalidArgument("builtin identity: output '" + config.outputs[i].name + "' must have the type of input '" +
                             config.inputs[i].name + "'");
    }
  }
  return Status::Ok();
}

Result<size_t> PositionOf(const std::vector<TensorConfig>& tensors, const std::string& name, const char* field) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return i;
  }
  return InvalidArgument(std::string("builtin add_sub: needs ") + field + " '" + name + "'");
}

Result<AddSubLayout> AddSubLayoutOf(const ModelConfig& config) {
  if (config.inputs.size() != 2 || config.outputs.size() != 2) {
    return InvalidArgument("builtin add_sub: needs inputs INPUT0, INPUT1 and outputs OUTPUT0, OUTPUT1");
  }
  AddSubLayout layout;
  WEFT_ASSIGN_OR_RETURN(layout.a, PositionOf(config.inputs, "INPUT0", "input"));
  WEFT_ASSIGN_OR_RETURN(layout.b, PositionOf(config.inputs, "INPUT1", "input"));
  WEFT_ASSIGN_OR_RETURN(layout.sum, PositionOf(config.outputs, "OUTPUT0", "output"));
  WEFT_ASSIGN_OR_RETURN(layout.difference, PositionOf(config.outputs, "OUTPUT1", "output"));
  DataType type = config.inputs[0].data_type;
  if (type != DataType::kFp32 && type != DataType::kFp64 && type != DataType::kInt32 && type != DataType::kInt64) {
    return InvalidArgument("builtin add_sub: supports FP32, FP64, INT32 and INT64, not " +
                           std::string(DataTypeName(type)));
  }
  for (const auto* tensors : {&config.inputs, &config.outputs}) {
    for (const auto& t : *tensors) {
      if (t.data_type != type || t.dims != config.inputs[0].dims) {
        return InvalidArgument("builtin add_sub: all inputs and outputs need the same data_type and dims; '" + t.name +
                               "' differs from 'INPUT0'");
      }
    }
  }
  return layout;
}

// affine: OUTPUT = scale * INPUT + offset, with scale and offset read from the version's model file, so that tests
// of reloads can tell versions apart by their outputs without a framework.

constexpr char kAffineDefaultFile[] = "model.txt";
// The file holds two numbers; the bound keeps a wrong file (a real model's weights, a device named by
// default_model_filename) from costing memory or time before it is refused.
constexpr size_t kAffineMaxFileBytes = 4096;

struct AffineParameters {
  float scale = 1;
  float offset = 0;
};

Status ValidateAffine(const ModelConfig& config) {
  if (config.inputs.size() != 1 || config.outputs.size() != 1) {
    return InvalidArgument("builtin affine: needs one input and one output, has " +
                           std::to_string(config.inputs.size()) + " inputs and " +
                           std::to_string(config.outputs.size()) + " outputs");
  }
  const TensorConfig& input = config.inputs[0];
  const TensorConfig& output = config.outputs[0];
  for (const TensorConfig* t : {&input, &output}) {
    if (t->data_type != DataType::kFp32) {
      return InvalidArgument("builtin affine: '" + t->name + "' data_type: supports TYPE_FP32 only, not " +
                             std::string(DataTypeConfigName(t->data_type)));
    }
  }
  // The output takes the input's shape, so the two must agree on what the framework sees and on what clients see.
  if (input.dims != output.dims || input.reshape != output.reshape) {
    return InvalidArgument("builtin affine: output '" + output.name + "' dims: must equal those of input '" +
                           input.name + "' (and so must reshape)");
  }
  return Status::Ok();
}

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string ErrnoMessage(int error) { return std::error_code(error, std::generic_category()).message(); }

// Reads at most max_bytes + 1 bytes of `file`: the extra byte tells a file that is too long from one that fits.
Result<std::string> ReadBounded(const std::filesystem::path& file, size_t max_bytes) {
  // O_NONBLOCK: a FIFO in its place must not hang the load waiting for a writer; it is refused below.
  ScopedFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return NotFound(file.string() + ": model file not found");
    return Unavailable(file.string() + ": cannot be opened: " + ErrnoMessage(error));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return Unavailable(file.string() + ": cannot be read: " + ErrnoMessage(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument(file.string() + ": not a regular file");
  std::string text(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unavailable(file.string() + ": cannot be read: " + ErrnoMessage(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  return text;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// A token from the file as it may appear in an error message: short, and printable ASCII only.
std::string Printable(std::string_view token) {
  constexpr size_t kMaxShown = 32;
  std::string shown;
  for (char c : token.substr(0, kMaxShown)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (token.size() > kMaxShown) shown += "...";
  return shown;
}

Result<AffineParameters> ParseAffine(std::string_view text, const std::string& file) {
  auto error = [&file](const std::string& detail) {
    return InvalidArgument(file + ": expected two numbers 'scale offset', " + detail);
  };
  if (text.size() > kAffineMaxFileBytes) {
    return error("in at most " + std::to_string(kAffineMaxFileBytes) + " bytes; the file is longer");
  }
  float numbers[2] = {};
  size_t count = 0;
  size_t i = 0;
  while (true) {
    while (i < text.size() && IsSpace(text[i])) ++i;
    if (i == text.size()) break;
    size_t end = i;
    while (end < text.size() && !IsSpace(text[end])) ++end;
    const std::string_view token = text.substr(i, end - i);
    if (count == 2) return error("found more than two (then '" + Printable(token) + "')");
    // Parsed as double and narrowed, so that a value past FP32's range is refused rather than made infinite.
    double value = 0;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc() || ptr != token.data() + token.size() || !std::isfinite(value)) {
      return error("got '" + Printable(token) + "', not a finite number");
    }
    if (std::fabs(value) > std::numeric_limits<float>::max()) {
      return error("got '" + Printable(token) + "', out of FP32's range");
    }
    numbers[count++] = static_cast<float>(value);
    i = end;
  }
  if (text.empty()) return error("the file is empty");
  if (count < 2) return error("found " + std::to_string(count));
  return AffineParameters{.scale = numbers[0], .offset = numbers[1]};
}

Result<AffineParameters> LoadAffine(const ModelConfig& config, const std::filesystem::path& version_dir) {
  const std::filesystem::path file =
      version_dir / (config.default_model_filename.empty() ? kAffineDefaultFile : config.default_model_filename);
  WEFT_ASSIGN_OR_RETURN(std::string text, ReadBounded(file, kAffineMaxFileBytes));
  return ParseAffine(text, file.string());
}

class AffineInstance : public ModelInstance {
 public:
  AffineInstance(ModelConfig config, AffineParameters parameters)
      : config_(std::move(config)), parameters_(parameters) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    const Tensor& x = inputs[0];
    std::byte* writable = nullptr;
    std::vector<Tensor> outputs;
    outputs.push_back(Tensor::Allocate(config_.outputs[0].name, DataType::kFp32, x.shape(), &writable));
    // The output is a fresh allocation, aligned for float.
    float* y = reinterpret_cast<float*>(writable);
    const size_t count = x.byte_size() / sizeof(float);
    for (size_t i = 0; i < count; ++i) {
      // Inputs may sit at any offset of a request body, so read them without assuming alignment.
      float value;
      std::memcpy(&value, x.data() + i * sizeof(float), sizeof(float));
      y[i] = parameters_.scale * value + parameters_.offset;
    }
    return outputs;
  }

 private:
  const ModelConfig config_;
  const AffineParameters parameters_;
};

class BuiltinBackend : public Backend {
 public:
  Status Validate(const ModelConfig& config) const override {
    WEFT_ASSIGN_OR_RETURN(BuiltinModel model, ModelOf(config));
    switch (model) {
      case BuiltinModel::kIdentity: return ValidateIdentity(config);
      case BuiltinModel::kAddSub: return AddSubLayoutOf(config).status();
      case BuiltinModel::kSleep:
        WEFT_RETURN_IF_ERROR(NonNegativeIntParameter(config, "batch_delay_us", 0).status());
        WEFT_RETURN_IF_ERROR(NonNegativeIntParameter(config, "item_delay_us", 0).status());
        return ValidateIdentity(config);
      case BuiltinModel::kCounter: return ValidateCounter(config);
      case BuiltinModel::kGpuSpin: return ValidateGpuSpin(config);
      case BuiltinModel::kAffine: return ValidateAffine(config);
      case BuiltinModel::kFault: return ValidateFault(config);
    }
    return Internal("unreachable");
  }

  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig& config,
                                                        const std::filesystem::path& version_dir,
                                                        int index) const override {
    WEFT_RETURN_IF_ERROR(Validate(config));
    WEFT_ASSIGN_OR_RETURN(BuiltinModel model, ModelOf(config));
    std::unique_ptr<ModelInstance> instance;
    switch (model) {
      case BuiltinModel::kIdentity: {
        instance =
            std::make_unique<IdentityInstance>(config, std::chrono::microseconds(0), std::chrono::microseconds(0));
        break;
      }
      case BuiltinModel::kAddSub: {
        WEFT_ASSIGN_OR_RETURN(AddSubLayout layout, AddSubLayoutOf(config));
        instance = std::make_unique<AddSubInstance>(config, layout);
        break;
      }
      case BuiltinModel::kSleep: {
        WEFT_ASSIGN_OR_RETURN(int64_t batch_us, NonNegativeIntParameter(config, "batch_delay_us", 0));
        WEFT_ASSIGN_OR_RETURN(int64_t item_us, NonNegativeIntParameter(config, "item_delay_us", 0));
        instance = std::make_unique<IdentityInstance>(config, std::chrono::microseconds(batch_us),
                                                      std::chrono::microseconds(item_us));
        break;
      }
      case BuiltinModel::kCounter: return MakeCounterInstance(config);
      case BuiltinModel::kGpuSpin: return MakeGpuSpinInstance(config);
      case BuiltinModel::kAffine: {
        WEFT_ASSIGN_OR_RETURN(AffineParameters parameters, LoadAffine(config, version_dir));
        instance = std::make_unique<AffineInstance>(config, parameters);
        break;
      }
      case BuiltinModel::kFault: return MakeFaultInstance(config, index);
    }
    return instance;
  }

  // Empty although affine reads model.txt: the other builtins need no file, and affine says itself which is missing.
  std::string DefaultModelFilename() const override { return ""; }
};

}  // namespace

std::shared_ptr<const Backend> MakeBuiltinBackend() { return std::make_shared<BuiltinBackend>(); }

}  // namespace weft
