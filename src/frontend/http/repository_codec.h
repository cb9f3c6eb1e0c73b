#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace weft {

// The JSON of the model repository routes (Triton's model repository extension). Pure functions. Thread-safe. Every
// body may be empty, which means no fields.

// POST v2/repository/index: `{"ready": bool}`.
struct RepositoryIndexRequest {
  bool ready = false;  // only the versions that are ready
};
Result<RepositoryIndexRequest> DecodeRepositoryIndexRequest(std::span<const std::byte> body);

// POST v2/repository/models/{m}/load: `{"parameters": {"config": "<the model config as JSON>"}}`. Triton's
// "file:<version>/<name>" parameters (model files in the request) are Unimplemented; any other parameter is
// InvalidArgument, so that a misspelt "config" is not silently ignored.
struct RepositoryLoadRequest {
  std::optional<std::string> config;
};
Result<RepositoryLoadRequest> DecodeRepositoryLoadRequest(std::span<const std::byte> body);

// POST v2/repository/models/{m}/unload: `{"parameters": {"unload_dependents": bool}}`.
struct RepositoryUnloadRequest {
  bool unload_dependents = false;
};
Result<RepositoryUnloadRequest> DecodeRepositoryUnloadRequest(std::span<const std::byte> body);

// One entry of the index: a model version, or a model with no version to report (version 0, left out of the JSON).
struct RepositoryIndexEntry {
  std::string name;
  int64_t version = 0;
  std::string state;
  std::string reason;
};
// `[{"name", "version", "state", "reason"}, ...]`; "version" is a string, as in Triton.
std::string EncodeRepositoryIndex(std::span<const RepositoryIndexEntry> entries);

}  // namespace weft
