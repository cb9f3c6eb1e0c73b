#include "model/backend.h"

namespace weft {

void ApplyDefaultInstanceGroups(const Backend& backend, ModelConfig& config) {
  if (config.instance_groups.empty()) config.instance_groups = backend.DefaultInstanceGroups(config);
}

void BackendRegistry::Register(std::string name, std::vector<std::string> platforms,
                               std::shared_ptr<const Backend> backend) {
  for (auto& p : platforms) platform_to_name_[std::move(p)] = name;
  by_name_[std::move(name)] = std::move(backend);
}

Result<std::shared_ptr<const Backend>> BackendRegistry::Find(const ModelConfig& config) const {
  std::string key = config.backend;
  if (key.empty()) {
    auto it = platform_to_name_.find(config.platform);
    if (it == platform_to_name_.end()) {
      if (config.platform.empty()) return InvalidArgument("neither 'platform' nor 'backend' is set");
      std::string known;
      for (const auto& [p, n] : platform_to_name_) known += (known.empty() ? "" : ", ") + p;
      return InvalidArgument("platform '" + config.platform + "' is not supported (supported: " + known + ")");
    }
    key = it->second;
  }
  auto it = by_name_.find(key);
  if (it == by_name_.end()) {
    std::string known;
    for (const auto& n : Names()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("backend '" + key + "' is not available in this build (available: " + known + ")");
  }
  return it->second;
}

std::vector<std::string> BackendRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [n, b] : by_name_) names.push_back(n);
  return names;
}

}  // namespace weft
