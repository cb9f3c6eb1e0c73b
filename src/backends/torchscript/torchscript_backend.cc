#include "backends/torchscript/torchscript_backend.h"

#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>

#include "backends/common/model_checks.h"
#include "backends/torchscript/torch_allocator.h"
#include "backends/torchscript/torch_errors.h"
#include "backends/torchscript/torch_stream.h"
#include "base/log.h"
#include "model/parameter_text.h"

namespace weft {
namespace {

constexpr char kDefaultModelFilename[] = "model.pt";
constexpr int64_t kMaxThreads = 1024;

std::optional<c10::ScalarType> TorchType(DataType type) {
  switch (type) {
    case DataType::kBool: return torch::kBool;
    case DataType::kUint8: return torch::kUInt8;
    case DataType::kInt8: return torch::kInt8;
    case DataType::kInt16: return torch::kInt16;
    case DataType::kInt32: return torch::kInt32;
    case DataType::kInt64: return torch::kInt64;
    case DataType::kFp16: return torch::kFloat16;
    case DataType::kBf16: return torch::kBFloat16;
    case DataType::kFp32: return torch::kFloat32;
    case DataType::kFp64: return torch::kFloat64;
    default: return std::nullopt;
  }
}

std::optional<DataType> WeftType(c10::ScalarType type) {
  switch (type) {
    case torch::kBool: return DataType::kBool;
    case torch::kUInt8: return DataType::kUint8;
    case torch::kInt8: return DataType::kInt8;
    case torch::kInt16: return DataType::kInt16;
    case torch::kInt32: return DataType::kInt32;
    case torch::kInt64: return DataType::kInt64;
    case torch::kFloat16: return DataType::kFp16;
    case torch::kBFloat16: return DataType::kBf16;
    case torch::kFloat32: return DataType::kFp32;
    case torch::kFloat64: return DataType::kFp64;
    default: return std::nullopt;
  }
}

// torch messages carry a C++ backtrace that is noise to a client; what_without_backtrace() drops it.
std::string Message(const c10::Error& e) { return e.what_without_backtrace(); }

Result<int64_t> IntraOpThreads(const ModelConfig& config) {
  WEFT_ASSIGN_OR_RETURN(int64_t threads, NonNegativeIntParameter(config, "intra_op_threads", 1));
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgument("parameters 'intra_op_threads': must be between 1 and " + std::to_string(kMaxThreads));
  }
  return threads;
}

// The intra-op thread count of the process: the last instance created sets it (see the header).
std::atomic<int> process_intra_op_threads{1};

// OpenMP keeps its thread count per thread, and oneDNN's kernels (those of optimize_for_inference) open OpenMP teams
// without asking torch: a thread that has not set the count runs them on every core. at::set_num_threads on the
// loading thread does not reach the threads that execute (the instance's, the CPU device's workers), so each applies
// the process's count before it executes. Measured on the peers' convnet at one connection: 379 req/s with the extra
// team threads, 668 without (docs/benchmarks.md).
void ApplyIntraOpThreadsToThisThread() {
  thread_local int applied = 0;
  const int wanted = process_intra_op_threads.load(std::memory_order_relaxed);
  if (applied == wanted) return;
  at::set_num_threads(wanted);
  applied = wanted;
}

// Whether a CPU instance's module goes through torch::jit::optimize_for_inference: nullopt when the config leaves it
// to the default (on, falling back to the module as loaded when the pass fails), true or false when it says.
Result<std::optional<bool>> OptimizeForInference(const ModelConfig& config) {
  const auto it = config.parameters.find("weft.optimize_for_inference");
  if (it == config.parameters.end()) return std::optional<bool>();
  WEFT_ASSIGN_OR_RETURN(const bool on, ParseParameterSwitch(it->first, it->second));
  return std::optional<bool>(on);
}

// A view of `tensor` for torch. The deleter holds the tensor's owner, so that a forward() that returns an input
// (or a view of one) as an output keeps the request's bytes alive for as long as that output lives.
torch::Tensor WrapInput(const Tensor& tensor) {
  auto options = torch::TensorOptions().dtype(*TorchType(tensor.type()));
  if (reinterpret_cast<uintptr_t>(tensor.data()) % DataTypeSize(tensor.type()) != 0) {
    // Compiled kernels may assume element alignment (loop peeling), and a tensor inside a request body can sit at
    // any offset: copy the rare misaligned input.
    torch::Tensor copy = torch::empty(tensor.shape(), options);
    std::memcpy(copy.data_ptr(), tensor.data(), tensor.byte_size());
    return copy;
  }
  std::shared_ptr<const void> owner = tensor.owner();
  // const_cast: torch wants a mutable pointer, but nothing here writes to an input.
  return torch::from_blob(
      const_cast<std::byte*>(tensor.data()), tensor.shape(), [owner](void*) {}, options);
}

Result<std::vector<torch::Tensor>> Flatten(const c10::IValue& value) {
  if (value.isTensor()) return std::vector<torch::Tensor>{value.toTensor()};
  if (value.isTensorList()) return value.toTensorVector();
  std::vector<torch::Tensor> tensors;
  auto add_all = [&tensors](const auto& elements) -> Status {
    for (const c10::IValue& element : elements) {
      if (!element.isTensor()) {
        return Internal("forward() returned a tuple or list with a " + element.tagKind() + ", expected Tensors");
      }
      tensors.push_back(element.toTensor());
    }
    return Status::Ok();
  };
  if (value.isTuple()) {
    WEFT_RETURN_IF_ERROR(add_all(value.toTuple()->elements()));
  } else if (value.isList()) {
    WEFT_RETURN_IF_ERROR(add_all(value.toListRef()));
  } else {
    return Internal("forward() returned a " + value.tagKind() + ", expected a Tensor or a tuple/list of Tensors");
  }
  return tensors;
}

class TorchScriptInstance : public ModelInstance {
 public:
  TorchScriptInstance(ModelConfig config, torch::jit::Module module, torch::Device device)
      : config_(std::move(config)), module_(std::move(module)), device_(device) {}

  // The multiplexer's stream for the next Execute (see ModelInstance::SetStream).
  void SetStream(const ExecutionStream& stream) override { stream_ = stream; }

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    WEFT_RETURN_IF_ERROR(CheckInputs(config_, inputs));
    try {
      ApplyIntraOpThreadsToThisThread();
      c10::InferenceMode inference_mode;
      // On a GPU with the multiplexer's stream: every copy and kernel goes into that stream, and Execute returns
      // once they are launched. The outputs are pinned host tensors that the stream fills; the caller reads them
      // after the stream's completion. Without a stream, torch's own stream, and the outputs are complete here.
      const bool on_stream = device_.is_cuda() && stream_.kind == MemoryKind::kGpu;
      std::unique_ptr<TorchStreamScope> scope = on_stream ? EnterTorchStream(stream_) : nullptr;
      std::vector<c10::IValue> arguments;
      arguments.reserve(inputs.size());
      for (const Tensor& input : inputs) {
        torch::Tensor t = WrapInput(input);
        if (on_stream) {
          // A copy from pageable memory first synchronizes the stream, so this thread would wait for the previous
          // batch to finish on the GPU. From a pinned stage the copy is queued behind it instead; torch's pinned
          // allocator holds the stage until the copy has run.
          torch::Tensor stage = torch::empty(t.sizes(), t.options().pinned_memory(true));
          stage.copy_(t);
          t = stage.to(device_, /*non_blocking=*/true);
        } else if (device_.is_cuda()) {
          t = t.to(device_);
        }
        arguments.emplace_back(std::move(t));
      }
      c10::IValue result;
      try {
        result = module_.forward(std::move(arguments));
      } catch (const std::exception& e) {
        // c10::Error from an operator, or the std::runtime_error the interpreter rethrows errors from inside the
        // script as; either may be an allocation that failed.
        return ExecutionError(e, TorchStage::kForward);
      }
      WEFT_ASSIGN_OR_RETURN(std::vector<torch::Tensor> results, Flatten(result));
      return ToOutputs(std::move(results), BatchSize(config_, inputs), on_stream);
    } catch (const std::exception& e) {
      // The copies to and from the device and the pinned stages allocate too.
      return ExecutionError(e, TorchStage::kOther);
    }
  }

 private:
  // Inside forward() the inputs matched the config, so what the model rejects is what the config leaves open (a -1
  // dim, a value); out of memory is the server's, wherever it happens. The scheduler retries a batch that ran out of
  // memory in two halves: on a GPU the cached blocks go back first, so that the halves do not fail on a cache that
  // the failed attempt filled or fragmented.
  Status ExecutionError(const std::exception& e, TorchStage stage) const {
    // The log gets the whole message, with the TorchScript traceback that the status leaves out.
    const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
    WEFT_LOG(Debug) << "model '" << config_.name
                    << "': execution failed: " << (torch_error ? Message(*torch_error) : e.what());
    Status status = TorchExecutionError(e, config_.name, stage);
    if (status.code() == StatusCode::kOutOfMemory && device_.is_cuda()) ReleaseTorchCudaCache();
    return status;
  }

  // May throw c10::Error (device copies, contiguous()). `async`: device results are copied into pinned host memory
  // in stream order, complete only after the stream's completion.
  Result<std::vector<Tensor>> ToOutputs(std::vector<torch::Tensor> results, int64_t batch_size, bool async) const {
    if (results.size() != config_.outputs.size()) {
      return Internal("model '" + config_.name + "' returned " + std::to_string(results.size()) +
                      " tensors, the config declares " + std::to_string(config_.outputs.size()) + " outputs");
    }
    std::vector<Tensor> outputs;
    outputs.reserve(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      const TensorConfig& want = config_.outputs[i];
      torch::Tensor result = results[i];
      if (!result.device().is_cpu() && async) {
        torch::Tensor host = torch::empty(result.sizes(), result.options().device(torch::kCPU).pinned_memory(true));
        host.copy_(result, /*non_blocking=*/true);
        result = std::move(host);
      } else if (!result.device().is_cpu()) {
        result = result.cpu();
      }
      result = result.contiguous();
      std::optional<DataType> type = WeftType(result.scalar_type());
      if (!type) {
        return Internal("output '" + want.name + "': the model produced " +
                        std::string(c10::toString(result.scalar_type())) + ", which weft cannot return");
      }
      Shape shape(result.sizes().begin(), result.sizes().end());
      WEFT_RETURN_IF_ERROR(CheckOutput(config_, want, *type, shape, batch_size));
      auto owner = std::make_shared<const torch::Tensor>(std::move(result));
      const auto* data = static_cast<const std::byte*>(owner->data_ptr());
      size_t byte_size = owner->nbytes();
      outputs.emplace_back(want.name, *type, std::move(shape), std::move(owner), data, byte_size);
    }
    return outputs;
  }

  const ModelConfig config_;
  torch::jit::Module module_;
  const torch::Device device_;  // where the module lives
  ExecutionStream stream_;      // set before each Execute by the executing thread
};

// KIND_GPU and KIND_AUTO instances go to a GPU when libtorch has CUDA and sees one (the first listed GPU, else
// GPU 0); everything else stays on the CPU, as with a CPU-only libtorch.
torch::Device DeviceFor(const ModelConfig& config, int index) {
  if (!TorchCudaAvailable()) return torch::Device(torch::kCPU);
  InstanceKind kind = InstanceKind::kAuto;
  int gpu = 0;
  int seen = 0;
  for (const InstanceGroupConfig& group : config.instance_groups) {
    if (index < seen + group.Instances()) {
      kind = group.kind;
      if (!group.gpus.empty()) gpu = group.GpuOf(index - seen);
      break;
    }
    seen += group.Instances();
  }
  if (kind != InstanceKind::kGpu && kind != InstanceKind::kAuto) return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
}

// A config whose input count forward() cannot take fails here, at load, rather than on every request.
Status CheckForwardArity(const torch::jit::Module& module, const ModelConfig& config) {
  const auto& arguments = module.get_method("forward").function().getSchema().arguments();
  size_t total = arguments.empty() ? 0 : arguments.size() - 1;  // without `self`
  size_t required = 0;
  for (size_t i = 1; i < arguments.size(); ++i) required += arguments[i].default_value().has_value() ? 0 : 1;
  if (config.inputs.size() < required || config.inputs.size() > total) {
    return InvalidArgument("model '" + config.name + "': forward() takes " + std::to_string(required) +
                           (required == total ? "" : " to " + std::to_string(total)) + " inputs, the config declares " +
                           std::to_string(config.inputs.size()));
  }
  return Status::Ok();
}

// Freezing folds the weights into the graph, and the pass then runs convolutions and linear layers on oneDNN with its
// own memory layout between them: on the peers' convnet a call takes 0.8 ms instead of 1.0 at batch 1 and 1.6 to 2.0
// instead of 2.6 to 4.3 at batch 2 (docs/benchmarks.md). A module the pass cannot take still serves as loaded, unless
// the config asked for the pass.
Result<torch::jit::Module> Optimized(torch::jit::Module module, const ModelConfig& config) {
  WEFT_ASSIGN_OR_RETURN(std::optional<bool> asked, OptimizeForInference(config));
  if (asked == false) return module;
  try {
    return torch::jit::optimize_for_inference(module);
  } catch (const std::exception& e) {
    const std::string reason = [&] {
      const auto* error = dynamic_cast<const c10::Error*>(&e);
      return error ? Message(*error) : std::string(e.what());
    }();
    if (asked == true) {
      return InvalidArgument("model '" + config.name + "': parameters 'weft.optimize_for_inference' is \"on\", but " +
                             "torch cannot optimize this module: " + reason);
    }
    WEFT_LOG(Warning) << "model '" << config.name
                      << "': served without optimize_for_inference, which failed: " << reason;
    return module;
  }
}

class TorchScriptBackend : public Backend {
 public:
  Status Validate(const ModelConfig& config) const override {
    for (const auto* tensors : {&config.inputs, &config.outputs}) {
      for (const TensorConfig& t : *tensors) {
        if (!TorchType(t.data_type)) {
          return InvalidArgument("tensor '" + t.name + "': the pytorch backend does not support " +
                                 std::string(DataTypeName(t.data_type)));
        }
      }
    }
    WEFT_RETURN_IF_ERROR(OptimizeForInference(config).status());
    return IntraOpThreads(config).status();
  }

  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig& config,
                                                        const std::filesystem::path& version_dir,
                                                        int index) const override {
    WEFT_RETURN_IF_ERROR(Validate(config));
    WEFT_ASSIGN_OR_RETURN(int64_t threads, IntraOpThreads(config));
    std::filesystem::path file =
        version_dir / (config.default_model_filename.empty() ? kDefaultModelFilename : config.default_model_filename);
    std::error_code error;
    if (!std::filesystem::is_regular_file(file, error)) {
      return NotFound("model '" + config.name + "': no model file " + file.string());
    }
    try {
      // Process-wide in torch (see the header): the last instance created decides for all models.
      at::set_num_threads(static_cast<int>(threads));
      process_intra_op_threads.store(static_cast<int>(threads), std::memory_order_relaxed);
      // Loaded onto the instance's device, whatever device the file was saved from.
      const torch::Device device = DeviceFor(config, index);
      torch::jit::Module module = torch::jit::load(file.string(), device);
      module.eval();
      WEFT_RETURN_IF_ERROR(CheckForwardArity(module, config));
      if (device.is_cuda()) {
        WEFT_LOG(Info) << "model '" << config.name << "' instance " << index << " on " << device;
      } else {
        WEFT_ASSIGN_OR_RETURN(module, Optimized(std::move(module), config));
      }
      return std::unique_ptr<ModelInstance>(std::make_unique<TorchScriptInstance>(config, std::move(module), device));
    } catch (const c10::Error& e) {
      return Internal("model '" + config.name + "': cannot load TorchScript file " + file.string() + ": " + Message(e));
    } catch (const std::exception& e) {
      return Internal("model '" + config.name + "': cannot load TorchScript file " + file.string() + ": " + e.what());
    }
  }

  std::string DefaultModelFilename() const override { return kDefaultModelFilename; }

  // An instance runs a batch on intra_op_threads cores (one by default). Two instances on the CPU, as Triton gives
  // ONNX Runtime and TensorFlow models there, served the peers' convnet 13 % faster on two cores than one did
  // (docs/benchmarks.md); a GPU keeps Triton's one instance.
  std::vector<InstanceGroupConfig> DefaultInstanceGroups(const ModelConfig& config) const override {
    if (TorchCudaAvailable()) return {};
    const Result<int64_t> threads = IntraOpThreads(config);
    const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    const int64_t count = std::clamp<int64_t>(cores / (threads.ok() ? *threads : 1), 1, 2);
    return {InstanceGroupConfig{.name = config.name, .count = static_cast<int>(count), .kind = InstanceKind::kCpu}};
  }
};

}  // namespace

std::shared_ptr<const Backend> MakeTorchScriptBackend() {
  InstallTorchLargeBufferAllocator();
  return std::make_shared<TorchScriptBackend>();
}

}  // namespace weft
