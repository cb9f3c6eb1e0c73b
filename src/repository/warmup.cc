#include "repository/warmup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/checked_math.h"
#include "base/log.h"
#include "tensor/tensor.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

// One input of a sample, measured and shaped before anything is allocated or executed.
struct PlannedInput {
  const TensorConfig* spec = nullptr;
  const WarmupInputConfig* input = nullptr;
  Shape shape;              // what Execute gets: batch dimension first when the model batches, reshaped
  uint64_t item_bytes = 0;  // one batch item; for a file, its measured size
  fs::path file;            // kFile: the file to read
  std::string shown;        // kFile: its name in messages, relative to the model directory
};

struct PlannedSample {
  const WarmupConfig* config = nullptr;
  std::string where;  // "warm-up 'name'"
  int64_t batch = 1;  // the batch dimension's size; 1 (and no such dimension) for a model that does not batch
  std::vector<PlannedInput> inputs;
};

// The bytes of one item of `input` when it is generated: a fixed-size type's byte size; for BYTES, empty elements
// (4 bytes each, their length).
Result<uint64_t> GeneratedItemBytes(const WarmupInputConfig& input) {
  if (input.data_type != DataType::kBytes) {
    WEFT_ASSIGN_OR_RETURN(size_t bytes, TensorByteSize(input.data_type, input.dims));
    return static_cast<uint64_t>(bytes);
  }
  std::optional<int64_t> elements = CheckedProduct(input.dims);
  std::optional<uint64_t> bytes;
  if (elements) bytes = CheckedMul(static_cast<uint64_t>(*elements), uint64_t{4});
  if (!bytes) return InvalidArgument("dims " + ShapeToString(input.dims) + " are too large");
  return *bytes;
}

// `reshape` with its -1 (at most one) resolved so that it holds `count` elements, as the engine resolves it for a
// request.
Result<Shape> ResolveReshape(Shape reshape, int64_t count) {
  int64_t known = 1;
  std::optional<size_t> unknown;
  for (size_t i = 0; i < reshape.size(); ++i) {
    if (reshape[i] < 0) {
      if (unknown) return InvalidArgument("reshape " + ShapeToString(reshape) + " has more than one -1");
      unknown = i;
    } else {
      std::optional<int64_t> next = CheckedMul(known, reshape[i]);
      if (!next) return InvalidArgument("reshape " + ShapeToString(reshape) + " is too large");
      known = *next;
    }
  }
  if (unknown && known != 0 && count % known == 0) {
    reshape[*unknown] = count / known;
  } else if (unknown || known != count) {
    return InvalidArgument("reshape " + ShapeToString(reshape) + " cannot hold the sample's " + std::to_string(count) +
                           " elements");
  }
  return reshape;
}

// The size of a regular file, by its path.
Result<uint64_t> MeasureFile(const fs::path& file, const std::string& shown) {
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (status.type() == fs::file_type::not_found) return NotFound(shown + ": not found");
  if (ec) return Internal(shown + ": cannot be read: " + ec.message());
  // A FIFO or a device would block the loader or never end.
  if (!fs::is_regular_file(status)) return InvalidArgument(shown + ": not a regular file");
  const uintmax_t size = fs::file_size(file, ec);
  if (ec) return Internal(shown + ": cannot be read: " + ec.message());
  return static_cast<uint64_t>(size);
}

// Reads exactly into.size() bytes, the size the file was measured at; a file that has changed type or size since
// is refused rather than read further.
Status ReadExactly(const fs::path& file, const std::string& shown, std::span<std::byte> into) {
  // O_NONBLOCK: a FIFO put in the file's place after it was measured must not block the open.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(shown + ": not found");
    return Internal(shown + ": cannot be opened: " + std::strerror(err));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Internal(shown + ": cannot be read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != into.size()) {
    return InvalidArgument(shown + ": changed while it was read");
  }
  size_t done = 0;
  while (done < into.size()) {
    const ssize_t n = ::read(fd, into.data() + done, into.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(shown + ": read failed: " + std::strerror(errno));
    if (n == 0) return InvalidArgument(shown + ": changed while it was read");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<PlannedInput> PlanInput(const ModelConfig& config, const TensorConfig& spec, const WarmupInputConfig& input,
                               int64_t batch, const fs::path& model_dir) {
  PlannedInput planned{.spec = &spec, .input = &input};
  WEFT_ASSIGN_OR_RETURN(const uint64_t generated, GeneratedItemBytes(input));
  planned.item_bytes = generated;
  if (input.source == WarmupInputConfig::Source::kFile) {
    planned.shown = "warmup/" + input.file;
    planned.file = model_dir / "warmup" / input.file;
    WEFT_ASSIGN_OR_RETURN(planned.item_bytes, MeasureFile(planned.file, planned.shown));
    if (input.data_type != DataType::kBytes && planned.item_bytes != generated) {
      return InvalidArgument(planned.shown + " has " + std::to_string(planned.item_bytes) + " bytes, dims " +
                             ShapeToString(input.dims) + " of " + std::string(DataTypeConfigName(input.data_type)) +
                             " take " + std::to_string(generated));
    }
    if (input.data_type == DataType::kBytes) {
      // The elements are known only by reading them. Read once here, so that a bad file fails before anything has
      // run, and again (and checked again) when the sample is built; BYTES warm-up files are small in practice.
      if (planned.item_bytes > ConfigLimits::kMaxWarmupSampleBytes) {
        return InvalidArgument(planned.shown + " is larger than the limit of a sample, " +
                               std::to_string(ConfigLimits::kMaxWarmupSampleBytes >> 20) + " MiB");
      }
      std::vector<std::byte> contents(static_cast<size_t>(planned.item_bytes));
      WEFT_RETURN_IF_ERROR(ReadExactly(planned.file, planned.shown, contents));
      WEFT_RETURN_IF_ERROR(ValidateTensorBytes(DataType::kBytes, input.dims, contents).WithContext(planned.shown));
    }
  }
  Shape item = input.dims;
  if (spec.reshape) {
    std::optional<int64_t> elements = CheckedProduct(input.dims);
    if (!elements) return InvalidArgument("dims " + ShapeToString(input.dims) + " are too large");
    WEFT_ASSIGN_OR_RETURN(item, ResolveReshape(*spec.reshape, *elements));
  }
  if (config.max_batch_size > 0) planned.shape.push_back(batch);
  planned.shape.insert(planned.shape.end(), item.begin(), item.end());
  return planned;
}

// Everything that can be checked without executing: inputs, shapes, files and their sizes, the sample's bytes.
Result<PlannedSample> PlanSample(const ModelConfig& config, const WarmupConfig& sample, const fs::path& model_dir) {
  PlannedSample planned{.config = &sample, .where = "warm-up '" + sample.name + "'"};
  planned.batch = config.max_batch_size > 0 ? int64_t{sample.batch_size} : 1;
  uint64_t total = 0;
  for (const TensorConfig& spec : config.inputs) {
    const std::string where = planned.where + ": input '" + spec.name + "'";
    auto it = sample.inputs.find(spec.name);
    if (it == sample.inputs.end()) return InvalidArgument(where + ": missing from the sample");
    Result<PlannedInput> input = PlanInput(config, spec, it->second, planned.batch, model_dir);
    if (!input.ok()) return input.status().WithContext(where);
    // ValidateModelConfig bounds what is generated; a file's size is known only now.
    std::optional<uint64_t> bytes = CheckedMul(input->item_bytes, static_cast<uint64_t>(planned.batch));
    if (bytes) bytes = CheckedAdd(*bytes, total);
    if (!bytes || *bytes > ConfigLimits::kMaxWarmupSampleBytes) {
      return InvalidArgument(where + ": the sample's inputs take more than " +
                             std::to_string(ConfigLimits::kMaxWarmupSampleBytes >> 20) + " MiB, the limit");
    }
    total = *bytes;
    planned.inputs.push_back(std::move(*input));
  }
  return planned;
}

// FNV-1a of the sample's and the input's names: the same data on every run, different data for each input.
uint64_t Seed(std::string_view sample, std::string_view input) {
  uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](std::string_view text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 1099511628211ull;
    }
  };
  mix(sample);
  mix(std::string_view("\0", 1));
  mix(input);
  return hash;
}

// Random bytes, as Triton's; BOOL elements are 0 or 1 (any other byte is not a bool a backend may read).
void FillRandom(std::span<std::byte> out, uint64_t seed, bool booleans) {
  std::mt19937_64 engine(seed);
  size_t i = 0;
  while (i < out.size()) {
    const uint64_t word = engine();
    for (int k = 0; k < 8 && i < out.size(); ++k, ++i) {
      const uint64_t byte = (word >> (8 * k)) & (booleans ? 0x1 : 0xff);
      out[i] = static_cast<std::byte>(byte);
    }
  }
}

// The input's tensor: one item generated or read, repeated along the batch dimension.
Result<Tensor> BuildInput(const PlannedSample& sample, const PlannedInput& p) {
  const size_t item_bytes = static_cast<size_t>(p.item_bytes);  // the sample's total is within 1 GiB
  std::vector<std::byte> bytes(item_bytes * static_cast<size_t>(sample.batch));
  const std::span<std::byte> item(bytes.data(), item_bytes);
  const DataType type = p.input->data_type;
  switch (p.input->source) {
    case WarmupInputConfig::Source::kZero: break;
    case WarmupInputConfig::Source::kRandom:
      // Triton generates zeros for BYTES here: empty elements, which any model that reads strings accepts.
      if (type != DataType::kBytes) FillRandom(item, Seed(sample.config->name, p.spec->name), type == DataType::kBool);
      break;
    case WarmupInputConfig::Source::kFile:
      WEFT_RETURN_IF_ERROR(ReadExactly(p.file, p.shown, item));
      if (type == DataType::kBytes)
        WEFT_RETURN_IF_ERROR(ValidateTensorBytes(type, p.input->dims, item).WithContext(p.shown));
      break;
  }
  for (int64_t b = 1; b < sample.batch; ++b) std::memcpy(bytes.data() + b * item_bytes, item.data(), item_bytes);
  return Tensor::FromBytes(p.spec->name, type, p.shape, std::move(bytes));
}

Status RunSample(const LoadedVersion& version, const PlannedSample& sample, std::span<const Tensor> inputs) {
  const uint32_t runs = std::max<uint32_t>(1, sample.config->count);
  for (size_t i = 0; i < version.instances.size(); ++i) {
    ModelInstance* instance = version.instances[i].get();
    WEFT_CHECK(instance != nullptr) << "version " << version.version << " of '" << version.config.name
                                    << "' has no instance " << i;
    const std::string where = sample.where + " on instance " + std::to_string(i);
    for (uint32_t run = 0; run < runs; ++run) {
      Result<std::vector<Tensor>> outputs = instance->Execute(inputs);
      if (!outputs.ok()) return outputs.status().WithContext(where);
      if (outputs->size() != version.config.outputs.size()) {
        return Internal(where + ": the backend returned " + std::to_string(outputs->size()) +
                        " outputs, the config declares " + std::to_string(version.config.outputs.size()));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status WarmUpVersion(const LoadedVersion& version) {
  const ModelConfig& config = version.config;
  if (config.warmup.empty()) return Status::Ok();
  const auto start = std::chrono::steady_clock::now();
  const fs::path model_dir = version.dir.parent_path();
  // Every sample is planned (its files measured) first, so that a bad file fails before anything has run.
  std::vector<PlannedSample> samples;
  for (const WarmupConfig& sample : config.warmup) {
    if (sample.batch_size == 0) {
      WEFT_LOG(Info) << "model '" << config.name << "' version " << version.version << ": warm-up '" << sample.name
                     << "' has batch_size 0 and is skipped, as in Triton";
      continue;
    }
    WEFT_ASSIGN_OR_RETURN(PlannedSample planned, PlanSample(config, sample, model_dir));
    samples.push_back(std::move(planned));
  }
  for (const PlannedSample& sample : samples) {
    // One sample's inputs at a time: each may take up to ConfigLimits::kMaxWarmupSampleBytes.
    std::vector<Tensor> inputs;
    inputs.reserve(sample.inputs.size());
    for (const PlannedInput& input : sample.inputs) {
      Result<Tensor> tensor = BuildInput(sample, input);
      if (!tensor.ok()) return tensor.status().WithContext(sample.where + ": input '" + input.spec->name + "'");
      inputs.push_back(std::move(*tensor));
    }
    WEFT_RETURN_IF_ERROR(RunSample(version, sample, inputs));
  }
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  WEFT_LOG(Info) << "model '" << config.name << "' version " << version.version << ": warmed up with " << samples.size()
                 << " sample(s) on " << version.instances.size() << " instance(s) in " << elapsed.count() << " ms";
  return Status::Ok();
}

}  // namespace weft
