#include "repository/repository.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <iomanip>
#include <set>
#include <system_error>

#include "base/log.h"
#include "model/classification.h"
#include "repository/repository_scan.h"

namespace weft {
namespace fs = std::filesystem;

namespace {

std::string JoinVersions(const std::vector<int64_t>& versions) {
  if (versions.empty()) return "none";
  std::string s;
  for (int64_t v : versions) s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

bool IsHidden(const fs::path& path) {
  const std::string name = path.filename().string();
  return !name.empty() && name[0] == '.';
}

Result<std::vector<int64_t>> ListVersions(const fs::path& model_dir) {
  std::vector<int64_t> versions;
  std::error_code ec;
  for (fs::directory_iterator it(model_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    if (auto v = ParseVersionDirName(it->path().filename().string())) versions.push_back(*v);
  }
  if (ec) return Internal(model_dir.string() + ": cannot be listed: " + ec.message());
  std::sort(versions.begin(), versions.end());
  return versions;
}

// Fills `entry` as far as loading gets and returns the model's status.
Status LoadModelInto(const RepositoryOptions& options, const fs::path& model_dir, ModelEntry* entry) {
  const fs::path config_file = model_dir / "config.pbtxt";
  const std::string source = config_file.string();
  std::error_code ec;
  if (!fs::is_regular_file(config_file, ec)) return NotFound(model_dir.string() + ": config.pbtxt not found");

  Result<ModelConfig> parsed = options.parse_config(config_file);
  if (!parsed.ok()) return parsed.status();
  ModelConfig config = std::move(parsed).value();
  if (config.name.empty()) config.name = entry->name;
  if (config.name != entry->name) {
    return InvalidArgument(source + ": name: '" + config.name + "' does not match the directory name '" + entry->name +
                           "'");
  }
  // The parser is injected; check again so that every entry's config holds what backends rely on.
  WEFT_RETURN_IF_ERROR(ValidateModelConfig(config).WithContext(source));
  entry->config = config;

  Result<std::shared_ptr<const Backend>> backend = options.backends->Find(config);
  if (!backend.ok()) return backend.status().WithContext(source);
  WEFT_RETURN_IF_ERROR((*backend)->Validate(config).WithContext(source));
  ApplyDefaultInstanceGroups(**backend, config);
  entry->config = config;

  WEFT_ASSIGN_OR_RETURN(std::vector<int64_t> available, ListVersions(model_dir));
  const std::vector<int64_t> selected = SelectVersions(config.version_policy, available);
  if (selected.empty()) {
    return NotFound(model_dir.string() + ": no version directory matches the version policy (" +
                    VersionPolicyToString(config.version_policy) + "; version directories: " + JoinVersions(available) +
                    ")");
  }
  for (int64_t version : selected) {
    Result<std::shared_ptr<LoadedVersion>> loaded = LoadVersion(config, **backend, model_dir, version);
    if (loaded.ok()) {
      (*loaded)->backend = *backend;
      entry->versions.push_back(std::move(*loaded));
    } else {
      entry->failed_versions.emplace_back(version, loaded.status());
    }
  }
  if (entry->versions.empty()) return entry->failed_versions.front().second;
  return Status::Ok();
}

ModelEntry LoadModel(const RepositoryOptions& options, const fs::path& model_dir) {
  const auto start = std::chrono::steady_clock::now();
  ModelEntry entry;
  entry.name = model_dir.filename().string();
  const std::string root = model_dir.parent_path().string();
  entry.status = WithoutRoot(LoadModelInto(options, model_dir, &entry), root);
  for (auto& [version, status] : entry.failed_versions) status = WithoutRoot(status, root);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

  for (const auto& [version, status] : entry.failed_versions) {
    if (entry.status.ok()) {
      WEFT_LOG(Warning) << "model '" << entry.name << "' version " << version << ": " << status.ToString();
    }
  }
  if (!entry.status.ok()) {
    WEFT_LOG(Error) << "model '" << entry.name << "' is unavailable: " << entry.status.ToString();
    return entry;
  }
  std::vector<int64_t> versions;
  for (const auto& v : entry.versions) versions.push_back(v->version);
  WEFT_LOG(Info) << "loaded model '" << entry.name << "' versions [" << JoinVersions(versions) << "] with "
                 << entry.config->InstanceCount() << " instance(s) each in " << std::fixed << std::setprecision(1) << ms
                 << " ms";
  return entry;
}

}  // namespace

std::string VersionPolicyToString(const VersionPolicyConfig& policy) {
  switch (policy.kind) {
    case VersionPolicyConfig::Kind::kLatest: return "latest " + std::to_string(policy.num_versions);
    case VersionPolicyConfig::Kind::kAll: return "all";
    case VersionPolicyConfig::Kind::kSpecific: return "specific [" + JoinVersions(policy.versions) + "]";
  }
  return "?";
}

Result<std::shared_ptr<LoadedVersion>> LoadVersion(const ModelConfig& config, const Backend& backend,
                                                   const fs::path& model_dir, int64_t version) {
  auto loaded = std::make_shared<LoadedVersion>();
  loaded->version = version;
  loaded->config = config;
  loaded->dir = model_dir / std::to_string(version);
  for (const TensorConfig& output : config.outputs) {
    if (output.label_filename.empty()) continue;
    WEFT_ASSIGN_OR_RETURN(loaded->labels[output.name], ReadLabelFile(model_dir / output.label_filename));
  }
  const std::string file =
      config.default_model_filename.empty() ? backend.DefaultModelFilename() : config.default_model_filename;
  if (!file.empty()) {
    const fs::path model_file = loaded->dir / file;
    std::error_code ec;
    if (!fs::exists(model_file, ec)) return NotFound(model_file.string() + ": model file not found");
  }
  const int count = config.InstanceCount();
  for (int i = 0; i < count; ++i) {
    Result<std::unique_ptr<ModelInstance>> instance = backend.CreateInstance(config, loaded->dir, i);
    const std::string context = loaded->dir.string() + ": instance " + std::to_string(i);
    if (!instance.ok()) return instance.status().WithContext(context);
    if (*instance == nullptr) return Internal(context + ": the backend returned no instance");
    loaded->instances.push_back(std::move(*instance));
  }
  return loaded;
}

Status WithoutRoot(const Status& status, const std::string& root) {
  if (status.ok() || root.empty()) return status;
  std::string prefix = root;
  if (prefix.back() != '/') prefix += '/';
  std::string message = status.message();
  for (size_t at = message.find(prefix); at != std::string::npos; at = message.find(prefix, at)) {
    message.erase(at, prefix.size());
  }
  return Status(status.code(), std::move(message));
}

std::vector<int64_t> SelectVersions(const VersionPolicyConfig& policy, std::vector<int64_t> available) {
  std::sort(available.begin(), available.end());
  available.erase(std::unique(available.begin(), available.end()), available.end());
  // Versions come from directory names, which are positive; anything else is not a version.
  available.erase(available.begin(), std::upper_bound(available.begin(), available.end(), int64_t{0}));
  switch (policy.kind) {
    case VersionPolicyConfig::Kind::kAll: return available;
    case VersionPolicyConfig::Kind::kLatest: {
      const size_t keep = policy.num_versions > 0 ? static_cast<size_t>(policy.num_versions) : 0;
      if (keep < available.size()) available.erase(available.begin(), available.end() - keep);
      return available;
    }
    case VersionPolicyConfig::Kind::kSpecific: {
      const std::set<int64_t> wanted(policy.versions.begin(), policy.versions.end());
      std::erase_if(available, [&](int64_t v) { return !wanted.contains(v); });
      return available;
    }
  }
  return {};
}

Result<std::vector<ModelEntry>> LoadRepository(const RepositoryOptions& options) {
  WEFT_CHECK(options.parse_config) << "RepositoryOptions::parse_config is not set";
  WEFT_CHECK(options.backends != nullptr) << "RepositoryOptions::backends is not set";
  const std::string root = options.root.string();
  std::error_code ec;
  if (!fs::exists(options.root, ec)) return NotFound(root + ": model repository not found");
  if (!fs::is_directory(options.root, ec)) return InvalidArgument(root + ": model repository is not a directory");

  std::vector<fs::path> model_dirs;
  for (fs::directory_iterator it(options.root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (IsHidden(it->path()) || !it->is_directory(type_ec)) continue;
    model_dirs.push_back(it->path());
  }
  if (ec) return Internal(root + ": model repository cannot be listed: " + ec.message());
  std::sort(model_dirs.begin(), model_dirs.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  std::vector<ModelEntry> entries;
  entries.reserve(model_dirs.size());
  for (const auto& dir : model_dirs) entries.push_back(LoadModel(options, dir));
  return entries;
}

}  // namespace weft
