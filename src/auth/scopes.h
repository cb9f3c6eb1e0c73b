#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace weft {

// What a route needs (docs/security.md lists every route under one of these).
enum class Permission : uint8_t {
  kHealth,        // liveness and readiness: open unless the server closes them
  kMetadata,      // server and model metadata, model config, readiness, statistics
  kInfer,         // inference on one model
  kSharedMemory,  // registering, unregistering and listing shared memory regions
  kAdmin,         // repository control, rollouts, trace and log settings
  kMetrics,       // GET /metrics
};
std::string_view PermissionName(Permission permission);  // "health", "metadata", "infer", "shm", "admin", "metrics"

// The scopes one identity holds. A scope is "infer" (every model), "infer:<model>" (that model only), "metadata",
// "shm", "admin" or "metrics". "admin" also grants "shm"; no other scope implies another. Copyable, immutable once
// built.
class ScopeSet {
 public:
  ScopeSet() = default;
  // The key file's list: InvalidArgument, naming it, for a scope that is not one of the above (a typo there would
  // otherwise lock a client out without a word).
  static Result<ScopeSet> Parse(const std::vector<std::string>& scopes);
  // A JWT's `scope` claim (space-separated, RFC 8693). Scopes of other services share the claim, so unknown ones
  // are skipped.
  static ScopeSet ParseClaim(std::string_view space_separated);

  // Whether a request that needs `permission` may go on; `model` matters for kInfer only. kHealth, the least
  // privileged route, is allowed to every identity, even one without scopes (whether callers without a credential
  // reach it is the server's decision).
  bool Allows(Permission permission, std::string_view model) const;
  bool empty() const { return permissions_ == 0 && infer_models_.empty(); }
  // The scopes, space-separated, in a fixed order (for logs and tests).
  std::string ToString() const;

 private:
  uint32_t permissions_ = 0;               // one bit per Permission held outright
  std::vector<std::string> infer_models_;  // sorted, unique: the models of "infer:<model>" scopes
};

}  // namespace weft
