#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "model/backend.h"
#include "model/model_config.h"

namespace weft {

// Reads one config file (config.pbtxt) into a ModelConfig. Errors name the file, the field and the reason.
// Injected so that the repository core does not depend on protobuf (see repository/pbtxt/).
using ConfigParser = std::function<Result<ModelConfig>(const std::filesystem::path& config_file)>;

// One version of a model, loaded: its config and its instances. Immutable once built, except that each
// instance is used by one thread at a time (the engine's runner for that instance). An instance that the scheduler
// quarantines (weft.execution_timeout_ms) stays here until the version is torn down; its replacement belongs to the
// scheduler.
struct LoadedVersion {
  int64_t version = 0;
  ModelConfig config;
  std::filesystem::path dir;
  // The labels of each output with a label_filename (read from the model directory when the version loads), for
  // the classification extension.
  std::map<std::string, std::vector<std::string>> labels;
  std::vector<std::unique_ptr<ModelInstance>> instances;
  // What created the instances, to create a replacement later; null when the version was built by hand (tests).
  std::shared_ptr<const Backend> backend;
};

// What the repository knows about one model directory.
struct ModelEntry {
  std::string name;
  // Ok when at least one version is ready; otherwise why the model is unavailable ("<file>: <field>: <why>").
  Status status;
  std::optional<ModelConfig> config;                     // present when the config parsed and validated
  std::vector<std::shared_ptr<LoadedVersion>> versions;  // ascending by version, ready ones only
  // Versions that the policy chose but that failed to load, with why.
  std::vector<std::pair<int64_t, Status>> failed_versions;
};

struct RepositoryOptions {
  std::filesystem::path root;
  ConfigParser parse_config;
  const BackendRegistry* backends = nullptr;
};

// Chooses the versions to serve from the numeric version directories present. Pure. Returns ascending order.
std::vector<int64_t> SelectVersions(const VersionPolicyConfig& policy, std::vector<int64_t> available);

// "latest 1", "all", "specific [1, 3]": the policy as messages name it.
std::string VersionPolicyToString(const VersionPolicyConfig& policy);

// Loads version `version` of a model: reads its outputs' label files, checks that its model file exists and creates
// each instance of `config` through `backend` from `<model_dir>/<version>/`. Errors name the directory and the
// instance.
Result<std::shared_ptr<LoadedVersion>> LoadVersion(const ModelConfig& config, const Backend& backend,
                                                   const std::filesystem::path& model_dir, int64_t version);

// `status` with the repository's own path taken out of its message ("/srv/models/mlp/config.pbtxt: ..." becomes
// "mlp/config.pbtxt: ..."). These reasons reach clients in readiness, index and metadata answers, and where the
// repository lies on the server's disk is not theirs to know; the start-up log names the repository once.
Status WithoutRoot(const Status& status, const std::string& root);

// Scans `<root>/<model>/config.pbtxt` and `<root>/<model>/<version>/`, parses and validates each config,
// selects versions with the policy and creates each version's instances through its backend.
// A broken model becomes an entry with an error status; the others load regardless. Fails only when the root
// itself cannot be read. Entries are sorted by name.
Result<std::vector<ModelEntry>> LoadRepository(const RepositoryOptions& options);

}  // namespace weft
