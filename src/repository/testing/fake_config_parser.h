#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "model/model_config.h"
#include "repository/repository.h"

namespace weft::fakes {

// A valid config for a model with one FP32 input "x" and one FP32 output "y" of dims [4], on platform
// "fake_platform", so that repository tests need no protobuf.
ModelConfig SimpleConfig(std::string name);

// A ConfigParser that ignores the file's content and returns what the test registered for the model directory
// that holds the file. Thread-compatible: register everything before parsing.
class FakeConfigParser {
 public:
  void Set(const std::string& model_dir_name, Result<ModelConfig> result);
  Result<ModelConfig> Parse(const std::filesystem::path& config_file) const;
  // Refers to this object, which must outlive the returned parser.
  ConfigParser AsParser() const {
    return [this](const std::filesystem::path& file) { return Parse(file); };
  }

 private:
  std::map<std::string, Result<ModelConfig>> results_;
};

}  // namespace weft::fakes
