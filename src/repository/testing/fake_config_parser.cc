#include "repository/testing/fake_config_parser.h"

namespace weft::fakes {

ModelConfig SimpleConfig(std::string name) {
  ModelConfig config;
  config.name = std::move(name);
  config.platform = "fake_platform";
  config.inputs.push_back({.name = "x", .data_type = DataType::kFp32, .dims = {4}, .reshape = std::nullopt});
  config.outputs.push_back({.name = "y", .data_type = DataType::kFp32, .dims = {4}, .reshape = std::nullopt});
  return config;
}

void FakeConfigParser::Set(const std::string& model_dir_name, Result<ModelConfig> result) {
  results_.insert_or_assign(model_dir_name, std::move(result));
}

Result<ModelConfig> FakeConfigParser::Parse(const std::filesystem::path& config_file) const {
  const std::string dir = config_file.parent_path().filename().string();
  auto it = results_.find(dir);
  if (it == results_.end()) return NotFound(config_file.string() + ": the test registered no config for '" + dir + "'");
  return it->second;
}

}  // namespace weft::fakes
