#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "base/result.h"
#include "model/model_config.h"

namespace inference {
class ModelConfig;
}

namespace weft {

// Parses Triton's config.pbtxt (protobuf text format of inference.ModelConfig, proto/model_config.proto) into a
// validated ModelConfig whose `json` holds the config as Triton's model_configuration endpoint renders it.
//
// Errors are InvalidArgument and start with `source_name`:
//   "<source>:<line>:<column>: <reason>"   for syntax errors and unknown enum values,
//   "<source>: <field>: <reason>"           for semantic errors and features weft does not support
//                                           (sequence_batching, ensemble_scheduling, batch_input/batch_output,
//                                           decoupled transactions).
// Unknown fields (from newer Triton versions) are skipped with one warning each, so that existing repositories
// keep loading. An empty `name` is allowed here (the repository defaults it to the directory name).
Result<ModelConfig> ParseModelConfigText(std::string_view text, const std::string& source_name);

inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

// Parses a config given as JSON (protobuf's JSON mapping of inference.ModelConfig: the form that GET .../config
// answers, and that Triton's load API takes as {"parameters": {"config": "<json>"}}) exactly as
// ParseModelConfigText parses text: same defaults, same validation, same errors. Every error is InvalidArgument and
// starts with `source_name` ("parameters.config: ..."); JSON errors carry no line and column. Field names may be
// the proto's (snake_case) or lowerCamelCase. Unknown fields are skipped with one warning each, naming their path;
// an unknown enum name is an error, as in the text form. An empty or absent `name` takes `default_name`. Larger than
// kMaxConfigFileBytes: InvalidArgument before anything is parsed. Thread-safe (no shared state), as are the others.
Result<ModelConfig> ParseModelConfigJson(std::string_view json, const std::string& source_name,
                                         const std::string& default_name);

// Reads and parses `file`. A config without a name takes the name of the directory that holds the file, as in
// Triton. InvalidArgument for a file over kMaxConfigFileBytes. Fits ConfigParser (repository/repository.h).
Result<ModelConfig> ParseModelConfigFile(const std::filesystem::path& file);

// The config that the model_configuration endpoints answer for a served `config` (one parsed here, then named and
// given its instance groups by the repository): its `json` with the served name, and, where the file has no
// instance_group, the groups the repository settled on (a backend's default; none is one instance, shown as one
// group of count 1 and kind KIND_AUTO). Groups written in the file are shown as written. Internal when `json` does
// not parse (it always does when it came from the parsers above).
Status FillServedConfig(const ModelConfig& config, inference::ModelConfig* out);
Result<std::string> ServedConfigJson(const ModelConfig& config);

}  // namespace weft
