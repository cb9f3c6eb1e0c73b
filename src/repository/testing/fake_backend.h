#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/backend.h"

namespace weft::fakes {

// A Backend for tests that loads nothing: its instances echo their inputs as the configured outputs. It records
// each CreateInstance call and fails the calls that a test asks it to fail. Configure it before sharing it;
// the recording is thread-safe.
class FakeBackend : public Backend {
 public:
  struct Options {
    std::string default_model_filename;  // empty = no file needed
    Status validate_status;              // what Validate returns
    // Version directory name ("2") -> the status CreateInstance returns for instances in it.
    std::map<std::string, Status> create_failures;
    std::vector<InstanceGroupConfig> default_instance_groups;  // what DefaultInstanceGroups returns
  };

  explicit FakeBackend(Options options) : options_(std::move(options)) {}

  Status Validate(const ModelConfig& config) const override { return options_.validate_status; }
  Result<std::unique_ptr<ModelInstance>> CreateInstance(const ModelConfig& config,
                                                        const std::filesystem::path& version_dir,
                                                        int index) const override;
  std::string DefaultModelFilename() const override { return options_.default_model_filename; }
  std::vector<InstanceGroupConfig> DefaultInstanceGroups(const ModelConfig&) const override {
    return options_.default_instance_groups;
  }

  struct Creation {
    std::string model;
    std::filesystem::path version_dir;
    int index = 0;
  };
  // Every successful CreateInstance call, in call order.
  std::vector<Creation> creations() const;

 private:
  const Options options_;
  mutable std::mutex mu_;
  mutable std::vector<Creation> creations_;  // guarded by mu_
};

}  // namespace weft::fakes
