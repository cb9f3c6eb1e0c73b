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

// One loaded copy of a model that runs batches. The narrow contract every backend implements: never called
// concurrently for one instance; inputs come in the order of the config's inputs, already in the framework's
// shape (reshape applied), with the batch dimension first when max_batch_size > 0. Returns one tensor per
// configured output, named as in the config. Must not throw: framework exceptions become a Status here.
class ModelInstance {
 public:
  virtual ~ModelInstance() = default;
  virtual Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) = 0;
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
};

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
