#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/request.h"
#include "tensor/data_type.h"
#include "tensor/tensor.h"

namespace weft {

// A model's configuration as plain typed structs. Field names follow Triton's model_config.proto so that the
// mapping from config.pbtxt is obvious; the core never sees protobuf.

struct TensorConfig {
  std::string name;
  DataType data_type = DataType::kInvalid;
  Shape dims;                    // without the batch dimension when max_batch_size > 0; -1 = variable
  std::optional<Shape> reshape;  // the shape the framework sees, if it differs from dims
  // Outputs only: a file in the model's directory with one class label per line, for the classification
  // extension (model/classification.h). Relative, inside the model directory (ValidateModelConfig).
  std::string label_filename;

  friend bool operator==(const TensorConfig&, const TensorConfig&) = default;
};

enum class InstanceKind { kAuto, kGpu, kCpu, kModel };

struct InstanceGroupConfig {
  std::string name;
  int count = 1;  // per listed GPU when `gpus` is not empty (Triton's rule)
  InstanceKind kind = InstanceKind::kAuto;
  std::vector<int> gpus;

  // The instances this group makes: count, times the number of listed GPUs.
  int Instances() const { return gpus.empty() ? count : count * static_cast<int>(gpus.size()); }
  // The GPU of the group's `index`-th instance (0 <= index < Instances()): `count` on each listed GPU in turn; -1
  // when the group lists none.
  int GpuOf(int index) const { return gpus.empty() ? -1 : gpus[static_cast<size_t>(index / count) % gpus.size()]; }

  friend bool operator==(const InstanceGroupConfig&, const InstanceGroupConfig&) = default;
};

struct VersionPolicyConfig {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_versions = 1;           // for kLatest
  std::vector<int64_t> versions;  // for kSpecific

  friend bool operator==(const VersionPolicyConfig&, const VersionPolicyConfig&) = default;
};

struct QueuePolicyConfig {
  enum class TimeoutAction { kReject, kDelay };
  TimeoutAction timeout_action = TimeoutAction::kReject;
  uint64_t default_timeout_us = 0;  // 0 = none
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;  // 0 = unbounded

  friend bool operator==(const QueuePolicyConfig&, const QueuePolicyConfig&) = default;
};

struct DynamicBatchingConfig {
  std::vector<int> preferred_batch_size;
  uint64_t max_queue_delay_us = 0;
  bool preserve_ordering = false;
  uint32_t priority_levels = 0;  // 0 = one level
  uint32_t default_priority_level = 0;
  QueuePolicyConfig default_queue_policy;
  std::map<uint64_t, QueuePolicyConfig> priority_queue_policy;

  friend bool operator==(const DynamicBatchingConfig&, const DynamicBatchingConfig&) = default;
};

enum class ModelPriority { kDefault, kMax, kMin };

// One input of a warm-up sample (Triton's ModelWarmup.Input). Like every struct here: a plain value,
// thread-compatible.
struct WarmupInputConfig {
  DataType data_type = DataType::kInvalid;
  Shape dims;  // without the batch dimension; no -1 allowed
  // Triton's oneof input_data_type. kRandom on a BYTES input gives empty elements, as in Triton (random bytes are
  // rarely a valid string for the model that reads them).
  enum class Source { kZero, kRandom, kFile } source = Source::kZero;
  std::string file;  // kFile: Triton's input_data_file, relative to <model dir>/warmup/

  friend bool operator==(const WarmupInputConfig&, const WarmupInputConfig&) = default;
};

// A request that is run on every instance of a version before it serves (Triton's ModelWarmup).
struct WarmupConfig {
  std::string name;
  // The batch size of the warm-up request (for a model that batches; its inputs are repeated that many times). 0
  // skips the sample, as in Triton, where an unset batch_size reads as 0.
  uint32_t batch_size = 1;
  std::map<std::string, WarmupInputConfig> inputs;  // every input of the model, by name
  uint32_t count = 0;                               // Triton: 0 = run once; n = run n times

  friend bool operator==(const WarmupConfig&, const WarmupConfig&) = default;
};

struct ModelConfig {
  std::string name;
  std::string platform;
  std::string backend;
  int max_batch_size = 0;  // 0 = the model takes no batch dimension
  std::vector<TensorConfig> inputs;
  std::vector<TensorConfig> outputs;
  std::vector<InstanceGroupConfig> instance_groups;
  VersionPolicyConfig version_policy;
  std::string default_model_filename;
  std::map<std::string, std::string> parameters;
  std::optional<DynamicBatchingConfig> dynamic_batching;
  ModelPriority priority = ModelPriority::kDefault;
  std::vector<WarmupConfig> warmup;  // config field model_warmup, in config order

  // The configuration rendered as JSON for the model_configuration endpoint (Triton's field names).
  std::string json;

  // The instances over all groups (1 without groups). Valid configs only: ValidateModelConfig bounds the sum.
  int InstanceCount() const;
  const TensorConfig* FindInput(const std::string& name) const;
  const TensorConfig* FindOutput(const std::string& name) const;
  // A parameter's string value, or `fallback` when absent.
  std::string Parameter(const std::string& key, const std::string& fallback = "") const;

  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Upper bounds on what a config may ask for, checked by ValidateModelConfig. Each guards what the value sizes: a
// thread and a backend copy per instance, a queue and metric series per priority level, the int64 arithmetic of
// shapes and of microseconds turned into nanoseconds. A config past one fails to load, alone; the other models
// serve. docs/architecture.md ("Limits") gives the reasons.
struct ConfigLimits {
  static constexpr int64_t kMaxInstances = 1024;  // over all instance groups of one model
  static constexpr int64_t kMaxGpusPerGroup = 1024;
  static constexpr int kMaxGpuIndex = 127;  // a device index is an int8_t in libtorch (c10::DeviceIndex)
  static constexpr int64_t kMaxBatchSize = int64_t{1} << 20;
  static constexpr size_t kMaxTensors = 1024;  // inputs, and outputs
  static constexpr size_t kMaxDims = 64;
  static constexpr uint32_t kMaxPriorityLevels = 256;
  static constexpr size_t kMaxPreferredBatchSizes = 1024;
  // A queue delay is how long a request may wait for company: an hour is already far past any serving use.
  static constexpr uint64_t kMaxQueueDelayMicros = uint64_t{3600} * 1000000;
  // Timeouts: a year, as for a request's own 'timeout' parameter (model/request.h).
  static constexpr uint64_t kMaxTimeoutMicros = weft::kMaxTimeoutMicros;
  // Warm-up runs every sample `count` times on every instance before the version serves. Samples and count bound
  // how long a load may take: 64 x 1000 executions per instance is already minutes for a large model, and Triton's
  // own examples use one or two samples with a count of a few.
  static constexpr size_t kMaxWarmupSamples = 64;
  static constexpr uint32_t kMaxWarmupCount = 1000;
  // One sample's inputs, batch included, are allocated at once, beside the serving version's memory.
  static constexpr uint64_t kMaxWarmupSampleBytes = uint64_t{1} << 30;
};

// Checks what every backend relies on: a name, unique tensor names, known datatypes, sane dims and counts, and
// every count and duration within ConfigLimits. Warm-up samples give every input and nothing else, with the
// input's datatype, dims that fit the input's (no -1), a batch size the model takes, a plain relative file name,
// and at most kMaxWarmupSampleBytes (BYTES elements count 4 bytes each, their length prefix; a file's own length
// is checked when it is read). InvalidArgument naming the field otherwise.
Status ValidateModelConfig(const ModelConfig& config);

// Whether the scheduler tunes the model's batch cap from measured costs (scheduler/batch_tuner.h). The parameter
// "weft.batch_tuning" says "on" or "off"; absent, it is on for a model that batches dynamically with a
// max_batch_size of 2 or more and names no preferred_batch_size (a config that names sizes chose its batches).
// "on" for a model that cannot batch is an error, as is any other value. ValidateModelConfig calls this.
Result<bool> BatchTuningEnabled(const ModelConfig& config);

// Whether the thread that receives a lone request may run its batch itself (scheduler/caller_run.h). The parameter
// "weft.run_on_caller" says "on" (the default) or "off"; any other value is an error. ValidateModelConfig calls this.
Result<bool> RunOnCallerEnabled(const ModelConfig& config);

// The shape a client sends for `tensor`, with -1 for the batch dimension when the model batches.
Shape FullShape(const ModelConfig& config, const TensorConfig& tensor);

// The batch size of a batch's inputs: the first dimension of the first input when the model batches, else 1.
int64_t BatchSize(const ModelConfig& config, std::span<const Tensor> inputs);

}  // namespace weft
