#include "repository/testing/fake_backend.h"

namespace weft::fakes {
namespace {

class EchoInstance : public ModelInstance {
 public:
  explicit EchoInstance(std::vector<std::string> output_names) : output_names_(std::move(output_names)) {}

  Result<std::vector<Tensor>> Execute(std::span<const Tensor> inputs) override {
    if (inputs.size() != output_names_.size()) {
      return Internal("echo instance: " + std::to_string(inputs.size()) + " inputs for " +
                      std::to_string(output_names_.size()) + " outputs");
    }
    std::vector<Tensor> outputs(inputs.begin(), inputs.end());
    for (size_t i = 0; i < outputs.size(); ++i) outputs[i].set_name(output_names_[i]);
    return outputs;
  }

 private:
  std::vector<std::string> output_names_;
};

}  // namespace

Result<std::unique_ptr<ModelInstance>> FakeBackend::CreateInstance(const ModelConfig& config,
                                                                   const std::filesystem::path& version_dir,
                                                                   int index) const {
  auto failure = options_.create_failures.find(version_dir.filename().string());
  if (failure != options_.create_failures.end()) return failure->second;
  std::vector<std::string> names;
  for (const auto& out : config.outputs) names.push_back(out.name);
  {
    std::lock_guard lock(mu_);
    creations_.push_back({config.name, version_dir, index});
  }
  return std::unique_ptr<ModelInstance>(std::make_unique<EchoInstance>(std::move(names)));
}

std::vector<FakeBackend::Creation> FakeBackend::creations() const {
  std::lock_guard lock(mu_);
  return creations_;
}

}  // namespace weft::fakes
