#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "frontend/shm/shared_memory.h"
#include "model/model_config.h"
#include "model/request.h"
#include "tensor/tensor.h"

namespace weft {

// The KServe v2 inference wire format (JSON, and the binary tensor data extension) to and from the engine's
// request and response types. Pure functions: no network, no engine. Thread-safe.

// How the response carries each output: in JSON `data`, or in the binary section after the JSON.
struct OutputFormat {
  std::vector<std::string> requested;  // the request's `outputs`, in its order; empty = every output
  bool binary_by_default = false;      // request parameter `binary_data_output`
  std::map<std::string, bool> binary;  // per requested output: its parameter `binary_data`
  // Requested outputs placed in shared memory: written there, and listed in the response without data.
  SharedMemoryOutputs shared_memory;
  // The shared memory the inputs were read from. Not about outputs, but checked with them before the answer: a
  // client that truncated a region under the request gets an error rather than results computed from zeros.
  std::vector<SharedMemorySlice> shared_memory_inputs;

  bool IsBinary(const std::string& output) const;
};

// A request body as the decoder sees it.
struct InferBody {
  // Must be followed by at least kRequestBodyPadding readable bytes (RequestBody guarantees it): the JSON is
  // parsed in place.
  std::span<const std::byte> bytes;
  // Keeps `bytes` alive; binary inputs view `bytes` and share this owner.
  std::shared_ptr<const void> owner;
  // Inference-Header-Content-Length: the JSON is the first json_size bytes and binary tensor data follows.
  std::optional<size_t> json_size;
  // Where inputs and outputs that name a region with the shared_memory_* parameters are looked up; null means the
  // extension is off.
  const SharedMemoryRegistry* shared_memory = nullptr;
};

struct DecodedInferRequest {
  std::unique_ptr<InferenceRequest> request;  // model name and version are left to the caller (they are in the URL)
  OutputFormat output_format;
};

// Decodes `{"id", "parameters", "inputs", "outputs"}`. Inputs sent in the binary section view the body in place
// when they are aligned for their type (copied otherwise). Inputs and requested outputs may name a shared memory
// region (`shared_memory_region`, `shared_memory_offset`, `shared_memory_byte_size`): inputs are read from it
// (see SharedMemoryInput) and outputs go to it; the window is checked against the region now. The `priority` and
// `timeout` (µs, from `arrival`) parameters set the request's priority and deadline; `binary_data_output` sets the
// output format; an output's `classification` (an integer, 0 = none) asks for its top classes; any other parameter
// is passed on. Errors: InvalidArgument for every wire-format problem (malformed
// JSON, a missing or mistyped field, an unknown datatype, data that does not fill its shape, an integer out of range of
// its type, binary sizes that do not add up, a shared memory window out of bounds); NotFound for an unknown shared
// memory region; Unimplemented for shared memory when it is off.
Result<DecodedInferRequest> DecodeInferRequest(const InferBody& body, SteadyTime arrival);

// Decodes the raw binary form (Inference-Header-Content-Length: 0): the body is the single input of a model with
// one input, batch 1 where the model batches, the variable dimension (at most one) taken from the body size; a
// BYTES input is one element. Every output is returned binary.
Result<DecodedInferRequest> DecodeRawInferRequest(const InferBody& body, const ModelConfig& config, SteadyTime arrival);

struct EncodedInferResponse {
  std::string json;
  // Outputs that go in the binary section, in the order that `json` lists them; their bytes follow `json`.
  std::vector<Tensor> binary;
};

// Encodes `{"model_name", "model_version", "id", "outputs"}` with the outputs `format` asks for, in its order.
// Outputs placed in shared memory are written to it and listed without data, with the parameters
// `shared_memory_region` and `shared_memory_byte_size` (the bytes written). InvalidArgument when a BYTES output
// that is not UTF-8 is asked for as JSON, an output does not fit its shared memory window, or the client truncated
// one of the request's regions while it ran (CheckSharedMemoryIntact); Internal when the
// response lacks a requested output or an output's bytes do not match its type and shape.
Result<EncodedInferResponse> EncodeInferResponse(const InferenceResponse& response, const OutputFormat& format);

}  // namespace weft
