#include "model/model_config.h"

#include <algorithm>
#include <optional>
#include <set>

#include "base/checked_math.h"
#include "model/parameter_text.h"
#include "model/resilience_config.h"

namespace weft {

int ModelConfig::InstanceCount() const {
  if (instance_groups.empty()) return 1;
  int total = 0;
  for (const auto& g : instance_groups) total += g.Instances();
  return total;
}

const TensorConfig* ModelConfig::FindInput(const std::string& n) const {
  for (const auto& t : inputs) {
    if (t.name == n) return &t;
  }
  return nullptr;
}

const TensorConfig* ModelConfig::FindOutput(const std::string& n) const {
  for (const auto& t : outputs) {
    if (t.name == n) return &t;
  }
  return nullptr;
}

std::string ModelConfig::Parameter(const std::string& key, const std::string& fallback) const {
  auto it = parameters.find(key);
  return it == parameters.end() ? fallback : it->second;
}

namespace {

// The product of a shape's fixed dimensions (a -1 counts as 1), or nullopt when it overflows.
std::optional<int64_t> FixedProduct(const Shape& shape) {
  int64_t product = 1;
  for (int64_t d : shape) {
    std::optional<int64_t> next = CheckedMul(product, d < 0 ? int64_t{1} : d);
    if (!next) return std::nullopt;
    product = *next;
  }
  return product;
}

Status ValidateTensors(const std::vector<TensorConfig>& tensors, const char* field, int max_batch_size) {
  if (tensors.size() > ConfigLimits::kMaxTensors) {
    return InvalidArgument(std::string(field) + ": " + std::to_string(tensors.size()) + " tensors, at most " +
                           std::to_string(ConfigLimits::kMaxTensors) + " are allowed");
  }
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name.empty()) return InvalidArgument(std::string(field) + ": a tensor has no name");
    if (!names.insert(t.name).second) {
      return InvalidArgument(std::string(field) + ": duplicate tensor name '" + t.name + "'");
    }
    if (t.data_type == DataType::kInvalid) {
      return InvalidArgument(std::string(field) + " '" + t.name + "': data_type is missing or TYPE_INVALID");
    }
    const std::string where = std::string(field) + " '" + t.name + "'";
    for (const Shape* shape : {&t.dims, t.reshape ? &*t.reshape : nullptr}) {
      if (shape == nullptr) continue;
      const char* what = shape == &t.dims ? "dims" : "reshape";
      if (shape->size() > ConfigLimits::kMaxDims) {
        return InvalidArgument(where + ": " + what + " has " + std::to_string(shape->size()) + " dimensions, at most " +
                               std::to_string(ConfigLimits::kMaxDims) + " are allowed");
      }
      for (int64_t d : *shape) {
        if (d < -1 || (d == 0 && shape == &t.dims)) {
          return InvalidArgument(where + ": " + what + " must be positive or -1, got " + ShapeToString(*shape));
        }
      }
      // A full batch of this tensor must have an element count and a byte size that int64 can hold, so that no
      // later product of these dims wraps.
      std::optional<int64_t> elements = FixedProduct(*shape);
      if (elements && max_batch_size > 0) elements = CheckedMul(*elements, int64_t{max_batch_size});
      if (elements && DataTypeSize(t.data_type) > 0) {
        elements = CheckedMul(*elements, static_cast<int64_t>(DataTypeSize(t.data_type)));
      }
      if (!elements) {
        return InvalidArgument(where + ": " + what + " " + ShapeToString(*shape) +
                               " is too large: a full batch would not fit in 2^63 bytes");
      }
    }
    if (t.reshape) {
      const bool variable = std::any_of(t.dims.begin(), t.dims.end(), [](int64_t d) { return d < 0; }) ||
                            std::any_of(t.reshape->begin(), t.reshape->end(), [](int64_t d) { return d < 0; });
      if (!variable && FixedProduct(t.dims) != FixedProduct(*t.reshape)) {
        return InvalidArgument(std::string(field) + " '" + t.name + "': reshape " + ShapeToString(*t.reshape) +
                               " has a different element count than dims " + ShapeToString(t.dims));
      }
    }
  }
  return Status::Ok();
}

// A file name from a config that must stay inside `dir`: relative, no "..", no NUL (the OS would end the name
// there). Names reach the file system as <dir>/<name>, and a config may come from a client (the load API).
Status ValidateRelativeFile(const std::string& field, const std::string& file, const std::string& dir) {
  if (file.empty()) return InvalidArgument(field + " is empty");
  if (file.find('\0') != std::string::npos) return InvalidArgument(field + " contains a NUL byte");
  if (file.front() == '/') return InvalidArgument(field + " '" + file + "' must be relative to " + dir);
  size_t start = 0;
  while (start <= file.size()) {
    size_t end = file.find('/', start);
    if (end == std::string::npos) end = file.size();
    if (file.compare(start, end - start, "..") == 0) {
      return InvalidArgument(field + " '" + file + "' must not leave " + dir + " (\"..\")");
    }
    start = end + 1;
  }
  return Status::Ok();
}

Status ValidateWarmupFile(const std::string& file) { return ValidateRelativeFile("input_data_file", file, "warmup/"); }

// The bytes of one item of a warm-up input: a fixed-size type's full size; BYTES elements 4 bytes each (their
// length prefix: zero and random data are empty elements). nullopt when it overflows.
std::optional<uint64_t> WarmupItemBytes(const WarmupInputConfig& input) {
  std::optional<int64_t> elements = CheckedProduct(input.dims);
  if (!elements) return std::nullopt;
  const uint64_t element_size = input.data_type == DataType::kBytes ? 4 : DataTypeSize(input.data_type);
  return CheckedMul(static_cast<uint64_t>(*elements), element_size);
}

Status ValidateWarmupSample(const ModelConfig& config, const WarmupConfig& sample) {
  if (config.max_batch_size > 0 && sample.batch_size > static_cast<uint32_t>(config.max_batch_size)) {
    return InvalidArgument("batch_size " + std::to_string(sample.batch_size) + " is over max_batch_size " +
                           std::to_string(config.max_batch_size));
  }
  // Triton: "For models that don't support batching, batch_size must be 1" (0 skips the sample there, as here).
  if (config.max_batch_size == 0 && sample.batch_size > 1) {
    return InvalidArgument("batch_size " + std::to_string(sample.batch_size) +
                           " must be 1 for a model that does not batch (max_batch_size 0)");
  }
  if (sample.count > ConfigLimits::kMaxWarmupCount) {
    return InvalidArgument("count " + std::to_string(sample.count) + " is over the limit of " +
                           std::to_string(ConfigLimits::kMaxWarmupCount));
  }
  for (const auto& [name, input] : sample.inputs) {
    if (config.FindInput(name) == nullptr) {
      return InvalidArgument("input '" + name + "': the model has no such input");
    }
  }
  const uint64_t batch = std::max<uint64_t>(1, sample.batch_size);
  uint64_t total = 0;
  for (const TensorConfig& spec : config.inputs) {
    auto it = sample.inputs.find(spec.name);
    if (it == sample.inputs.end()) {
      return InvalidArgument("input '" + spec.name + "' is missing: a sample gives every input of the model");
    }
    const WarmupInputConfig& input = it->second;
    const std::string where = "input '" + spec.name + "': ";
    if (input.data_type != spec.data_type) {
      return InvalidArgument(where + "data_type " + std::string(DataTypeConfigName(input.data_type)) +
                             " does not match the input's " + std::string(DataTypeConfigName(spec.data_type)));
    }
    bool fits = input.dims.size() == spec.dims.size();
    for (size_t d = 0; fits && d < input.dims.size(); ++d) {
      fits = input.dims[d] > 0 && (spec.dims[d] == -1 || spec.dims[d] == input.dims[d]);
    }
    if (!fits) {
      return InvalidArgument(where + "dims " + ShapeToString(input.dims) + " do not fit the input's dims " +
                             ShapeToString(spec.dims) + " (every dimension given, -1 of the input by a positive one)");
    }
    if (input.source == WarmupInputConfig::Source::kFile) {
      WEFT_RETURN_IF_ERROR(ValidateWarmupFile(input.file).WithContext("input '" + spec.name + "'"));
    }
    // Checked before anything is allocated for the sample: its inputs, batch included, are allocated at once.
    std::optional<uint64_t> bytes = WarmupItemBytes(input);
    if (bytes) bytes = CheckedMul(*bytes, batch);
    if (bytes) bytes = CheckedAdd(*bytes, total);
    if (!bytes || *bytes > ConfigLimits::kMaxWarmupSampleBytes) {
      return InvalidArgument(where + "the sample's inputs take more than " +
                             std::to_string(ConfigLimits::kMaxWarmupSampleBytes >> 20) + " MiB, the limit");
    }
    total = *bytes;
  }
  return Status::Ok();
}

Status ValidateWarmup(const ModelConfig& config) {
  if (config.warmup.size() > ConfigLimits::kMaxWarmupSamples) {
    return InvalidArgument("model_warmup: " + std::to_string(config.warmup.size()) + " samples, at most " +
                           std::to_string(ConfigLimits::kMaxWarmupSamples) + " are allowed");
  }
  for (size_t i = 0; i < config.warmup.size(); ++i) {
    const WarmupConfig& sample = config.warmup[i];
    WEFT_RETURN_IF_ERROR(ValidateWarmupSample(config, sample)
                             .WithContext("model_warmup[" + std::to_string(i) + "] '" + sample.name + "'"));
  }
  return Status::Ok();
}
}  // namespace

Status ValidateModelConfig(const ModelConfig& config) {
  if (config.name.empty()) return InvalidArgument("name: must not be empty");
  if (config.max_batch_size < 0) return InvalidArgument("max_batch_size: must not be negative");
  if (config.max_batch_size > ConfigLimits::kMaxBatchSize) {
    return InvalidArgument("max_batch_size: " + std::to_string(config.max_batch_size) + " is over the limit of " +
                           std::to_string(ConfigLimits::kMaxBatchSize));
  }
  if (!config.default_model_filename.empty()) {
    WEFT_RETURN_IF_ERROR(
        ValidateRelativeFile("default_model_filename", config.default_model_filename, "the version directory"));
  }
  if (config.inputs.empty()) return InvalidArgument("input: a model needs at least one input");
  if (config.outputs.empty()) return InvalidArgument("output: a model needs at least one output");
  WEFT_RETURN_IF_ERROR(ValidateTensors(config.inputs, "input", config.max_batch_size));
  WEFT_RETURN_IF_ERROR(ValidateTensors(config.outputs, "output", config.max_batch_size));
  for (const auto& output : config.outputs) {
    if (output.label_filename.empty()) continue;
    WEFT_RETURN_IF_ERROR(ValidateRelativeFile("label_filename", output.label_filename, "the model directory")
                             .WithContext("output '" + output.name + "'"));
  }
  int64_t instances = 0;
  for (const auto& g : config.instance_groups) {
    if (g.count < 1) return InvalidArgument("instance_group: count must be at least 1");
    if (g.count > ConfigLimits::kMaxInstances) {
      return InvalidArgument("instance_group: count " + std::to_string(g.count) + " is over the limit of " +
                             std::to_string(ConfigLimits::kMaxInstances) + " instances per model");
    }
    if (static_cast<int64_t>(g.gpus.size()) > ConfigLimits::kMaxGpusPerGroup) {
      return InvalidArgument("instance_group: lists " + std::to_string(g.gpus.size()) + " gpus, at most " +
                             std::to_string(ConfigLimits::kMaxGpusPerGroup) + " are allowed");
    }
    // Both factors are bounded above, so neither this product nor the running sum can overflow.
    instances += int64_t{g.count} * std::max<int64_t>(1, static_cast<int64_t>(g.gpus.size()));
    if (instances > ConfigLimits::kMaxInstances) {
      return InvalidArgument("instance_group: the groups make more than " +
                             std::to_string(ConfigLimits::kMaxInstances) + " instances (the limit per model)");
    }
    if (g.kind == InstanceKind::kCpu && !g.gpus.empty()) {
      return InvalidArgument("instance_group: a KIND_CPU group must not list gpus");
    }
    for (int gpu : g.gpus) {
      if (gpu < 0) return InvalidArgument("instance_group: gpus must not be negative, got " + std::to_string(gpu));
      // libtorch keeps a device index in 8 bits: 256 would silently be GPU 0.
      if (gpu > ConfigLimits::kMaxGpuIndex) {
        return InvalidArgument("instance_group: gpu " + std::to_string(gpu) + " is past the largest index, " +
                               std::to_string(ConfigLimits::kMaxGpuIndex));
      }
    }
  }
  if (config.version_policy.kind == VersionPolicyConfig::Kind::kLatest && config.version_policy.num_versions < 1) {
    return InvalidArgument("version_policy.latest.num_versions: must be at least 1");
  }
  if (config.dynamic_batching) {
    const auto& db = *config.dynamic_batching;
    for (int p : db.preferred_batch_size) {
      if (p < 1 || p > config.max_batch_size) {
        return InvalidArgument("dynamic_batching.preferred_batch_size: " + std::to_string(p) +
                               " is outside [1, max_batch_size]");
      }
    }
    if (db.preferred_batch_size.size() > ConfigLimits::kMaxPreferredBatchSizes) {
      return InvalidArgument("dynamic_batching.preferred_batch_size: more than " +
                             std::to_string(ConfigLimits::kMaxPreferredBatchSizes) + " sizes");
    }
    if (db.priority_levels > ConfigLimits::kMaxPriorityLevels) {
      return InvalidArgument("dynamic_batching.priority_levels: " + std::to_string(db.priority_levels) +
                             " is over the limit of " + std::to_string(ConfigLimits::kMaxPriorityLevels));
    }
    if (db.priority_levels > 0 && (db.default_priority_level < 1 || db.default_priority_level > db.priority_levels)) {
      return InvalidArgument("dynamic_batching.default_priority_level: must be in [1, priority_levels]");
    }
    if (db.max_queue_delay_us > ConfigLimits::kMaxQueueDelayMicros) {
      return InvalidArgument("dynamic_batching.max_queue_delay_microseconds: " + std::to_string(db.max_queue_delay_us) +
                             " is over the limit of " + std::to_string(ConfigLimits::kMaxQueueDelayMicros) +
                             " (one hour)");
    }
    auto check_policy = [](const QueuePolicyConfig& q, const std::string& field) -> Status {
      if (q.default_timeout_us > ConfigLimits::kMaxTimeoutMicros) {
        return InvalidArgument(field + ".default_timeout_microseconds: " + std::to_string(q.default_timeout_us) +
                               " is over the limit of " + std::to_string(ConfigLimits::kMaxTimeoutMicros) +
                               " (a year)");
      }
      return Status::Ok();
    };
    WEFT_RETURN_IF_ERROR(check_policy(db.default_queue_policy, "dynamic_batching.default_queue_policy"));
    for (const auto& [level, policy] : db.priority_queue_policy) {
      if (level < 1 || level > db.priority_levels) {
        return InvalidArgument("dynamic_batching.priority_queue_policy: level " + std::to_string(level) +
                               " is outside [1, priority_levels]");
      }
      WEFT_RETURN_IF_ERROR(
          check_policy(policy, "dynamic_batching.priority_queue_policy[" + std::to_string(level) + "]"));
    }
  }
  WEFT_RETURN_IF_ERROR(ValidateWarmup(config));
  // The weft.breaker.* and weft.fallback_models parameters: a bad value refuses the config here, at load, rather
  // than leaving a default in place.
  WEFT_RETURN_IF_ERROR(ParseResilienceConfig(config).status());
  WEFT_RETURN_IF_ERROR(BatchTuningEnabled(config).status());
  WEFT_RETURN_IF_ERROR(RunOnCallerEnabled(config).status());
  return Status::Ok();
}

Result<bool> RunOnCallerEnabled(const ModelConfig& config) {
  const auto it = config.parameters.find("weft.run_on_caller");
  if (it == config.parameters.end()) return true;
  return ParseParameterSwitch(it->first, it->second);
}

Result<bool> BatchTuningEnabled(const ModelConfig& config) {
  const bool batches = config.dynamic_batching && config.max_batch_size >= 2;
  const auto it = config.parameters.find("weft.batch_tuning");
  if (it == config.parameters.end()) return batches && config.dynamic_batching->preferred_batch_size.empty();
  WEFT_ASSIGN_OR_RETURN(const bool on, ParseParameterSwitch(it->first, it->second));
  if (!on) return false;
  if (!batches) {
    return InvalidArgument(
        "parameters 'weft.batch_tuning': \"on\" needs dynamic_batching and a max_batch_size of 2 or more");
  }
  return true;
}

int64_t BatchSize(const ModelConfig& config, std::span<const Tensor> inputs) {
  if (config.max_batch_size <= 0 || inputs.empty() || inputs[0].shape().empty()) return 1;
  return inputs[0].shape()[0];
}

Shape FullShape(const ModelConfig& config, const TensorConfig& tensor) {
  Shape s;
  if (config.max_batch_size > 0) s.push_back(-1);
  s.insert(s.end(), tensor.dims.begin(), tensor.dims.end());
  return s;
}

}  // namespace weft
