#include "model/model_config.h"

#include <set>

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
Status ValidateTensors(const std::vector<TensorConfig>& tensors, const char* field) {
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name.empty()) return InvalidArgument(std::string(field) + ": a tensor has no name");
    if (!names.insert(t.name).second) {
      return InvalidArgument(std::string(field) + ": duplicate tensor name '" + t.name + "'");
    }
    if (t.data_type == DataType::kInvalid) {
      return InvalidArgument(std::string(field) + " '" + t.name + "': data_type is missing or TYPE_INVALID");
    }
    for (int64_t d : t.dims) {
      if (d < -1 || d == 0) {
        return InvalidArgument(std::string(field) + " '" + t.name + "': dims must be positive or -1, got " +
                               ShapeToString(t.dims));
      }
    }
    if (t.reshape) {
      int64_t from = 1, to = 1;
      bool variable = false;
      for (int64_t d : t.dims) variable |= d < 0, from *= d < 0 ? 1 : d;
      for (int64_t d : *t.reshape) variable |= d < 0, to *= d < 0 ? 1 : d;
      if (!variable && from != to) {
        return InvalidArgument(std::string(field) + " '" + t.name + "': reshape " + ShapeToString(*t.reshape) +
                               " has a different element count than dims " + ShapeToString(t.dims));
      }
    }
  }
  return Status::Ok();
}
}  // namespace

Status ValidateModelConfig(const ModelConfig& config) {
  if (config.name.empty()) return InvalidArgument("name: must not be empty");
  if (config.max_batch_size < 0) return InvalidArgument("max_batch_size: must not be negative");
  if (config.inputs.empty()) return InvalidArgument("input: a model needs at least one input");
  if (config.outputs.empty()) return InvalidArgument("output: a model needs at least one output");
  WEFT_RETURN_IF_ERROR(ValidateTensors(config.inputs, "input"));
  WEFT_RETURN_IF_ERROR(ValidateTensors(config.outputs, "output"));
  for (const auto& g : config.instance_groups) {
    if (g.count < 1) return InvalidArgument("instance_group: count must be at least 1");
    if (g.kind == InstanceKind::kCpu && !g.gpus.empty()) {
      return InvalidArgument("instance_group: a KIND_CPU group must not list gpus");
    }
    for (int gpu : g.gpus) {
      if (gpu < 0) return InvalidArgument("instance_group: gpus must not be negative, got " + std::to_string(gpu));
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
    if (db.priority_levels > 0 && (db.default_priority_level < 1 || db.default_priority_level > db.priority_levels)) {
      return InvalidArgument("dynamic_batching.default_priority_level: must be in [1, priority_levels]");
    }
  }
  return Status::Ok();
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
