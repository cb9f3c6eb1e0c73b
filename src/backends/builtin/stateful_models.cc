#include "backends/builtin/stateful_models.h"

#include <chrono>
#include <thread>

#include "backends/common/model_checks.h"
#include "device/cuda/cuda_device.h"

namespace weft {
namespace {

class CounterInstance : public ModelInstance {
 public:
  CounterInstance(ModelConfig config, std::chrono::microseconds delay) : config_(std::move(config)), delay_(delay) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    const int64_t items = BatchSize(config_, inputs);
    std::byte* out = nullptr;
    Shape shape = config_.max_batch_size > 0 ? Shape{items, 1} : Shape{1};
    Tensor t = Tensor::Allocate(config_.outputs[0].name, DataType::kInt64, std::move(shape), &out);
    for (int64_t i = 0; i < items; ++i) reinterpret_cast<int64_t*>(out)[i] = next_++;
    return std::vector<Tensor>{std::move(t)};
  }

 private:
  const ModelConfig config_;
  const std::chrono::microseconds delay_;
  int64_t next_ = 0;  // only the executing thread touches it (one execution at a time per instance)
};

struct SpinParameters {
  int64_t spin_us = 1000;
  int64_t item_spin_us = 0;
  int64_t blocks = 1;
  int64_t threads_per_block = 32;
};

Result<SpinParameters> SpinParametersOf(const ModelConfig& config) {
  SpinParameters p;
  WEFT_ASSIGN_OR_RETURN(p.spin_us, NonNegativeIntParameter(config, "spin_us", p.spin_us));
  WEFT_ASSIGN_OR_RETURN(p.item_spin_us, NonNegativeIntParameter(config, "item_spin_us", p.item_spin_us));
  WEFT_ASSIGN_OR_RETURN(p.blocks, NonNegativeIntParameter(config, "blocks", p.blocks));
  WEFT_ASSIGN_OR_RETURN(p.threads_per_block, NonNegativeIntParameter(config, "threads_per_block", 32));
  if (p.blocks < 1 || p.blocks > (1 << 20)) return InvalidArgument("parameters 'blocks': must be in [1, 1048576]");
  if (p.threads_per_block < 1 || p.threads_per_block > 1024) {
    return InvalidArgument("parameters 'threads_per_block': must be in [1, 1024]");
  }
  return p;
}

class GpuSpinInstance : public ModelInstance {
 public:
  GpuSpinInstance(ModelConfig config, SpinParameters p) : config_(std::move(config)), p_(p) {}

  void SetStream(const ExecutionStream& stream) override { stream_ = stream; }

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    if (stream_.kind != MemoryKind::kGpu) {
      return Unavailable("model '" + config_.name +
                         "' (builtin gpu_spin) runs on a CUDA stream; this instance runs on the CPU device");
    }
    const auto spin = std::chrono::microseconds(p_.spin_us + p_.item_spin_us * BatchSize(config_, inputs));
    WEFT_RETURN_IF_ERROR(LaunchSpinKernel({DeviceKind::kCuda, stream_.device_id, stream_.native}, spin,
                                          static_cast<int>(p_.blocks), static_cast<int>(p_.threads_per_block)));
    std::vector<Tensor> outputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      outputs.push_back(inputs[i]);
      outputs.back().set_name(config_.outputs[i].name);
    }
    return outputs;
  }

 private:
  const ModelConfig config_;
  const SpinParameters p_;
  ExecutionStream stream_;  // set before each Execute, by the executing thread
};

Status SameInputsAndOutputs(const ModelConfig& config, const char* model) {
  if (config.outputs.size() != config.inputs.size()) {
    return InvalidArgument(std::string("builtin ") + model + ": needs as many outputs as inputs");
  }
  for (size_t i = 0; i < config.inputs.size(); ++i) {
    if (config.inputs[i].data_type != config.outputs[i].data_type) {
      return InvalidArgument(std::string("builtin ") + model + ": output '" + config.outputs[i].name +
                             "' must have the type of input '" + config.inputs[i].name + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

Status ValidateCounter(const ModelConfig& config) {
  if (config.inputs.size() != 1 || config.outputs.size() != 1) {
    return InvalidArgument("builtin counter: needs one input and one output");
  }
  const TensorConfig& out = config.outputs[0];
  if (out.data_type != DataType::kInt64 || out.dims != Shape{1} || out.reshape) {
    return InvalidArgument("builtin counter: output '" + out.name + "' must be TYPE_INT64 with dims [1]");
  }
  return NonNegativeIntParameter(config, "batch_delay_us", 0).status();
}

Result<std::unique_ptr<ModelInstance>> MakeCounterInstance(const ModelConfig& config) {
  WEFT_RETURN_IF_ERROR(ValidateCounter(config));
  WEFT_ASSIGN_OR_RETURN(int64_t delay, NonNegativeIntParameter(config, "batch_delay_us", 0));
  return std::unique_ptr<ModelInstance>(std::make_unique<CounterInstance>(config, std::chrono::microseconds(delay)));
}

Status ValidateGpuSpin(const ModelConfig& config) {
  WEFT_RETURN_IF_ERROR(SameInputsAndOutputs(config, "gpu_spin"));
  return SpinParametersOf(config).status();
}

Result<std::unique_ptr<ModelInstance>> MakeGpuSpinInstance(const ModelConfig& config) {
  WEFT_RETURN_IF_ERROR(ValidateGpuSpin(config));
  if (std::string why = CudaUnavailableReason(); !why.empty()) {
    return Unavailable("builtin gpu_spin needs a GPU: " + why);
  }
  WEFT_ASSIGN_OR_RETURN(SpinParameters p, SpinParametersOf(config));
  return std::unique_ptr<ModelInstance>(std::make_unique<GpuSpinInstance>(config, p));
}

}  // namespace weft
