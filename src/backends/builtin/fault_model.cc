#include "backends/builtin/fault_model.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "backends/common/model_checks.h"

namespace weft {
namespace {

constexpr char kRateInput[] = "FAULT_RATE";

struct FaultParameters {
  double failure_rate = 0;
  std::chrono::microseconds delay{0};
  std::chrono::milliseconds hang{0};
  double hang_rate = 1;
  int64_t oom_above_batch = 0;  // 0 = off
  double crash_rate = 0;
  std::optional<uint64_t> seed;
};

// Which config inputs carry data (output k passes data_inputs[k]) and where FAULT_RATE is, if configured.
struct FaultLayout {
  std::vector<size_t> data_inputs;
  std::optional<size_t> rate_input;
};

// Parses a probability parameter strictly: a number from 0 to 1, nothing around it; `fallback` when absent.
Result<double> RateParameter(const ModelConfig& config, const std::string& key, double fallback) {
  auto it = config.parameters.find(key);
  if (it == config.parameters.end()) return fallback;
  const std::string& text = it->second;
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  // NaN fails both comparisons, so it is tested on its own.
  if (error != std::errc() || end != text.data() + text.size() || std::isnan(value) || value < 0 || value > 1) {
    return InvalidArgument("parameters '" + key + "': expected a number from 0 to 1, got '" + text + "'");
  }
  return value;
}

Result<FaultParameters> FaultParametersOf(const ModelConfig& config) {
  FaultParameters p;
  WEFT_ASSIGN_OR_RETURN(p.failure_rate, RateParameter(config, "failure_rate", 0));
  WEFT_ASSIGN_OR_RETURN(int64_t delay_us, NonNegativeIntParameter(config, "delay_us", 0));
  p.delay = std::chrono::microseconds(delay_us);
  WEFT_ASSIGN_OR_RETURN(int64_t hang_ms, NonNegativeIntParameter(config, "hang_ms", 0));
  p.hang = std::chrono::milliseconds(hang_ms);
  WEFT_ASSIGN_OR_RETURN(p.hang_rate, RateParameter(config, "hang_rate", 1));
  WEFT_ASSIGN_OR_RETURN(p.oom_above_batch, NonNegativeIntParameter(config, "oom_above_batch", 0));
  WEFT_ASSIGN_OR_RETURN(p.crash_rate, RateParameter(config, "crash_rate", 0));
  if (config.parameters.contains("seed")) {
    WEFT_ASSIGN_OR_RETURN(int64_t seed, NonNegativeIntParameter(config, "seed", 0));
    p.seed = static_cast<uint64_t>(seed);
  }
  return p;
}

Result<FaultLayout> FaultLayoutOf(const ModelConfig& config) {
  FaultLayout layout;
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    const TensorConfig& input = config.inputs[i];
    if (input.name != kRateInput) {
      layout.data_inputs.push_back(i);
      continue;
    }
    if (input.data_type != DataType::kFp32 || input.dims != Shape{1} || input.reshape) {
      return InvalidArgument(std::string("builtin fault: input '") + kRateInput +
                             "' must be TYPE_FP32 with dims [1] and no reshape, is " +
                             std::string(DataTypeConfigName(input.data_type)) + " " + ShapeToString(input.dims));
    }
    layout.rate_input = i;
  }
  if (layout.data_inputs.empty()) {
    return InvalidArgument(std::string("builtin fault: needs an input other than ") + kRateInput);
  }
  if (layout.data_inputs.size() != config.outputs.size()) {
    return InvalidArgument(std::string("builtin fault: needs as many outputs as inputs other than ") + kRateInput +
                           ", has " + std::to_string(layout.data_inputs.size()) + " such inputs and " +
                           std::to_string(config.outputs.size()) + " outputs");
  }
  for (size_t k = 0; k < config.outputs.size(); ++k) {
    const TensorConfig& input = config.inputs[layout.data_inputs[k]];
    const TensorConfig& output = config.outputs[k];
    // The output is the input's tensor renamed, so the two must agree on everything clients and the framework see.
    if (input.data_type != output.data_type || input.dims != output.dims || input.reshape != output.reshape) {
      return InvalidArgument("builtin fault: output '" + output.name + "' must have the data_type, dims and reshape " +
                             "of input '" + input.name + "'");
    }
  }
  return layout;
}

uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

class FaultInstance : public ModelInstance {
 public:
  FaultInstance(ModelConfig config, FaultLayout layout, FaultParameters p, uint64_t seed)
      : config_(std::move(config)), layout_(std::move(layout)), p_(p), random_(seed) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    if (crashed_) return Internal("fault: instance crashed");
    if (p_.delay.count() > 0) std::this_thread::sleep_for(p_.delay);
    if (p_.oom_above_batch > 0) {
      const int64_t batch = BatchSize(inputs);
      if (batch > p_.oom_above_batch) {
        return OutOfMemory("fault: out of memory at batch size " + std::to_string(batch) + " (limit " +
                           std::to_string(p_.oom_above_batch) + ")");
      }
    }
    if (Draw(p_.crash_rate)) {
      crashed_ = true;
      return Internal("fault: instance crashed");
    }
    if (p_.hang.count() > 0 && Draw(p_.hang_rate)) std::this_thread::sleep_for(p_.hang);
    if (Draw(p_.failure_rate)) return Internal("fault: injected failure");
    if (layout_.rate_input) {
      const Tensor& rates = inputs[*layout_.rate_input];
      const size_t items = rates.byte_size() / sizeof(float);
      for (size_t i = 0; i < items; ++i) {
        // Inputs may sit at any offset of a request body, so read them without assuming alignment.
        float rate;
        std::memcpy(&rate, rates.data() + i * sizeof(float), sizeof(float));
        if (Draw(std::isnan(rate) ? 0.0 : static_cast<double>(rate))) {
          return Internal("fault: injected failure (" + std::string(kRateInput) + " of batch item " +
                          std::to_string(i) + ")");
        }
      }
    }
    std::vector<Tensor> outputs;
    outputs.reserve(config_.outputs.size());
    for (size_t k = 0; k < config_.outputs.size(); ++k) {
      outputs.push_back(inputs[layout_.data_inputs[k]]);
      outputs.back().set_name(config_.outputs[k].name);
    }
    return outputs;
  }

 private:
  // The first dimension of the first data input when the model batches, else 1 (CheckInputs ensured the rank).
  int64_t BatchSize(std::span<const Tensor> inputs) const {
    if (config_.max_batch_size <= 0) return 1;
    return inputs[layout_.data_inputs.front()].shape().front();
  }

  // True with probability `rate`, clamped to [0, 1]; rates 0 and 1 are exact and consume no randomness.
  bool Draw(double rate) {
    if (!(rate > 0)) return false;
    if (rate >= 1) return true;
    return std::bernoulli_distribution(rate)(random_);
  }

  // Constant after construction.
  const ModelConfig config_;
  const FaultLayout layout_;
  const FaultParameters p_;
  // Touched only by the executing thread (one execution at a time per instance).
  std::mt19937_64 random_;
  bool crashed_ = false;
};

}  // namespace

Status ValidateFault(const ModelConfig& config) {
  WEFT_RETURN_IF_ERROR(FaultLayoutOf(config).status());
  return FaultParametersOf(config).status();
}

Result<std::unique_ptr<ModelInstance>> MakeFaultInstance(const ModelConfig& config, int index) {
  WEFT_ASSIGN_OR_RETURN(FaultLayout layout, FaultLayoutOf(config));
  WEFT_ASSIGN_OR_RETURN(FaultParameters p, FaultParametersOf(config));
  const uint64_t seed = p.seed ? *p.seed + static_cast<uint64_t>(index) : RandomSeed();
  return std::unique_ptr<ModelInstance>(std::make_unique<FaultInstance>(config, std::move(layout), p, seed));
}

}  // namespace weft
