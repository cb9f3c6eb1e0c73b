#include "auth/scopes.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace weft {
namespace {

constexpr uint32_t Bit(Permission permission) { return uint32_t{1} << static_cast<unsigned>(permission); }

constexpr std::string_view kInferPrefix = "infer:";

// The scopes that stand for one permission outright; "infer:<model>" is read apart.
std::optional<Permission> PermissionOfScope(std::string_view scope) {
  if (scope == "infer") return Permission::kInfer;
  if (scope == "metadata") return Permission::kMetadata;
  if (scope == "shm") return Permission::kSharedMemory;
  if (scope == "admin") return Permission::kAdmin;
  if (scope == "metrics") return Permission::kMetrics;
  return std::nullopt;
}

}  // namespace

std::string_view PermissionName(Permission permission) {
  switch (permission) {
    case Permission::kHealth: return "health";
    case Permission::kMetadata: return "metadata";
    case Permission::kInfer: return "infer";
    case Permission::kSharedMemory: return "shm";
    case Permission::kAdmin: return "admin";
    case Permission::kMetrics: return "metrics";
  }
  return "unknown";
}

Result<ScopeSet> ScopeSet::Parse(const std::vector<std::string>& scopes) {
  ScopeSet set;
  for (const std::string& scope : scopes) {
    if (std::optional<Permission> permission = PermissionOfScope(scope)) {
      set.permissions_ |= Bit(*permission);
    } else if (scope.starts_with(kInferPrefix) && scope.size() > kInferPrefix.size()) {
      set.infer_models_.push_back(scope.substr(kInferPrefix.size()));
    } else {
      return InvalidArgument("unknown scope '" + scope +
                             "' (the scopes are infer, infer:<model>, metadata, shm, admin and metrics)");
    }
  }
  std::sort(set.infer_models_.begin(), set.infer_models_.end());
  set.infer_models_.erase(std::unique(set.infer_models_.begin(), set.infer_models_.end()), set.infer_models_.end());
  return set;
}

ScopeSet ScopeSet::ParseClaim(std::string_view space_separated) {
  ScopeSet set;
  while (!space_separated.empty()) {
    const size_t end = space_separated.find(' ');
    const std::string_view scope = space_separated.substr(0, end);
    space_separated.remove_prefix(end == std::string_view::npos ? space_separated.size() : end + 1);
    if (std::optional<Permission> permission = PermissionOfScope(scope)) {
      set.permissions_ |= Bit(*permission);
    } else if (scope.starts_with(kInferPrefix) && scope.size() > kInferPrefix.size()) {
      set.infer_models_.emplace_back(scope.substr(kInferPrefix.size()));
    }
  }
  std::sort(set.infer_models_.begin(), set.infer_models_.end());
  set.infer_models_.erase(std::unique(set.infer_models_.begin(), set.infer_models_.end()), set.infer_models_.end());
  return set;
}

bool ScopeSet::Allows(Permission permission, std::string_view model) const {
  switch (permission) {
    // The least privileged route: any identity that got this far is allowed.
    case Permission::kHealth: return true;
    case Permission::kInfer:
      return (permissions_ & Bit(Permission::kInfer)) != 0 ||
             std::binary_search(infer_models_.begin(), infer_models_.end(), model);
    case Permission::kSharedMemory:
      return (permissions_ & (Bit(Permission::kSharedMemory) | Bit(Permission::kAdmin))) != 0;
    case Permission::kMetadata:
    case Permission::kAdmin:
    case Permission::kMetrics: return (permissions_ & Bit(permission)) != 0;
  }
  return false;
}

std::string ScopeSet::ToString() const {
  std::string out;
  auto add = [&out](std::string_view scope) {
    if (!out.empty()) out += ' ';
    out += scope;
  };
  if (permissions_ & Bit(Permission::kMetadata)) add("metadata");
  if (permissions_ & Bit(Permission::kInfer)) add("infer");
  for (const std::string& model : infer_models_) add(std::string(kInferPrefix) + model);
  if (permissions_ & Bit(Permission::kSharedMemory)) add("shm");
  if (permissions_ & Bit(Permission::kAdmin)) add("admin");
  if (permissions_ & Bit(Permission::kMetrics)) add("metrics");
  return out;
}

}  // namespace weft
