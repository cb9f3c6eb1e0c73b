#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "loadgen/bench_options.h"
#include "loadgen/input_generator.h"

namespace weft {

// A request as the load generator sends it: built once per run, then shared by every connection.
struct PreparedRequest {
  std::string method = "POST";
  std::string target;                                        // path and query
  std::vector<std::pair<std::string, std::string>> headers;  // besides Host and Content-Length
  std::string body;
};

// A tensor's place in a registered shared memory region (the request parameters shared_memory_region,
// shared_memory_offset, shared_memory_byte_size).
struct SharedMemoryPlacement {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

struct InferRequestOptions {
  // Inputs after the JSON header with binary_data_size, and binary_data_output: true for the answer.
  bool binary = false;
  std::optional<int64_t> priority;
  std::optional<int64_t> timeout_us;
  std::map<std::string, BenchParameterValue> parameters;
  // Inputs read from shared memory instead of the request (their data is not sent), and outputs written to it
  // (requested by name, in this map's order).
  std::map<std::string, SharedMemoryPlacement> shared_memory_inputs;
  std::map<std::string, SharedMemoryPlacement> shared_memory_outputs;
};

// "/v2/models/{model}[/versions/{version}]" under the URL's base path ("" or "/prefix").
std::string ModelPath(std::string_view base_path, std::string_view model, std::string_view version);

// An inference request (POST {model_path}/infer) carrying `inputs`. JSON: the data as flat arrays
// (Content-Type application/json). Binary: the JSON header, then each input's bytes in order, with
// Inference-Header-Content-Length = the header's length (Content-Type application/octet-stream). Inputs and
// outputs placed in shared memory carry the region's parameters instead of data.
PreparedRequest BuildInferRequest(std::string_view model_path, const std::vector<GeneratedInput>& inputs,
                                  const InferRequestOptions& options);

// An inference request whose body is a complete KServe v2 JSON request, sent as it is. InvalidArgument when the
// body is not a JSON object: a typo in the file should fail before the run, not as a run of 400s.
Result<PreparedRequest> RawInferRequest(std::string_view model_path, std::string body);

// Appends an input's data as a flat JSON array, decoded from the binary layout.
void AppendJsonTensorData(const GeneratedInput& input, std::string* out);

}  // namespace weft
