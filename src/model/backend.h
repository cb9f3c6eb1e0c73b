#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/model_config.h"
#include "tensor/tensor.h"

namespace weft {

// The device queue an execution belongs to, as plain data so that the model layer needs no device layer. kind kGpu:
// `native` is a cudaStream_t of GPU `device_id`. kCpu: there is no device queue (native is null).
struct ExecutionStream {
  MemoryKind kind = MemoryKind::kCpu;
  int device_id = 0;
  void* native = nullptr;
};

// One loaded copy of a model that runs batches. The narrow contract every backend implements: never called
// concurrently for one instance; inputs come in the order of the config's inputs, already in the framework's
// shape (reshape applied), with the batch dimension first when max_batch_size > 0. Returns one tensor per
// configured output, named as in the config. Must not throw: framework exceptions become a Status here.
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  virtual Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) = 0;

  // Optional. Called on the executing thread right before an Execute that belongs to a device stream. A backend
  // that launches device work (TorchScript with CUDA, the gpu_spin builtin) launches it into `stream` and may
  // return outputs that are complete only once the stream has passed that work: the caller reads them after the
  // stream's completion fires, never before. The default ignores the stream: the instance computes on the calling
  // thread and its outputs are complete when Execute returns.
  virtual void SetStream(const ExecutionStream& stream) {}
};

// A runtime that turns model files into instances. Thread-safe.
class Backend {
 public:
  virtual ~Backend() = default;
  // Checks that `config` is one this backend can run (tensor types, parameters), without loading files.
  virtual Status Validate(const ModelConfig& config) const = 0;
  // Loads the model file(s) in `version_dir` for instance number `index` of the model.
  virtual Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig& config,
                                                                const std::filesystem::path& version_dir,
                                                                int index) const = 0;
  // The model file name used when the config names none ("model.pt", "model.onnx"; empty = none needed).
  virtual std::string DefaultModelFilename() const = 0;
  // The instance groups that serve a config naming none. Empty keeps Triton's default: one instance, on a GPU when
  // there is one. A backend whose instance runs on one core can ask for more where it runs on the CPU.
  virtual std::vector<InstanceGroupConfig> DefaultInstanceGroups(const ModelConfig& config) const { return {}; }
};

// `config` with the backend's default instance groups when it names none.
void ApplyDefaultInstanceGroups(const Backend& backend, ModelConfig& config);

// Maps a config's platform/backend to a Backend. Filled once at start-up, then read-only (thread-safe reads).
class BackendRegistry {
 public:
  // `name` is the backend name ("pytorch"); `platforms` are the platform strings that select it.
  void Register(std::string name, std::vector<std::string> platforms, std::shared_ptr<const Backend> backend);
  // NotFound names the platform/backend and lists the available ones.
  Result<std::shared_ptr<const Backend>> Find(const ModelConfig& config) const;
  std::vector<std::string> Names() const;

 private:
  std::map<std::string, std::shared_ptr<const Backend>> by_name_;
  std::map<std::string, std::string> platform_to_name_;
};

}  // namespace weft
