#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "frontend/shm/shared_memory.h"
#include "grpc_service.pb.h"
#include "model/request.h"

namespace weft {

// The KServe v2 gRPC inference messages to and from the engine's request and response types. Pure functions:
// no network and no engine (shared memory regions are looked up in the registry). Thread-safe.

struct DecodedModelInfer {
  std::unique_ptr<InferenceRequest> request;
  SharedMemoryOutputs shared_memory_outputs;            // requested outputs that go to shared memory
  std::vector<SharedMemorySlice> shared_memory_inputs;  // where inputs were read from: checked before the answer
};

// A model_version string as the engine takes it: "" = 0 (the server's choice). NotFound for anything that is not a
// positive integer, since no such version can exist.
Result<int64_t> ParseModelVersion(const std::string& model, const std::string& version);

// Decodes `message`. Inputs come from typed `contents` or from `raw_input_contents` (one entry per input, in
// order), never both in one request; FP16 and BF16 only raw. Raw inputs view `message` in place when aligned for
// their type (copied otherwise) and keep it alive, so the caller hands over a shared message. Inputs and outputs
// that name a region with `shared_memory_region`, `shared_memory_offset` and `shared_memory_byte_size` are
// looked up in `shared_memory`; null means the extension is off (Unimplemented). The `priority` and `timeout`
// (µs from `arrival`) parameters set the request's priority and deadline; an output's `classification` (int64, 0 =
// none) asks for its top classes; other parameters are passed on. Errors: InvalidArgument for every malformed
// message; NotFound for an unknown region or a bad version; Unimplemented for shared memory when it is off.
Result<DecodedModelInfer> DecodeModelInferRequest(std::shared_ptr<const inference::ModelInferRequest> message,
                                                  SteadyTime arrival, const SharedMemoryRegistry* shared_memory);

// Fills `out` with the outputs that `request` asked for, in its order (every output when it asked for none).
// Output bytes go to raw_output_contents; an output placed in shared memory is written there, and its entry in
// raw_output_contents stays empty (so that entry i still belongs to outputs[i]) and its parameters name the
// region and the bytes written. InvalidArgument when an output does not fit its shared memory window, or when the
// client truncated a region of the request's inputs or outputs while it ran (CheckSharedMemoryIntact); Internal
// when the response lacks a requested output or an output's bytes do not match its type and shape.
Status EncodeModelInferResponse(const InferenceResponse& response, const std::vector<std::string>& requested,
                                const SharedMemoryOutputs& shared_memory_outputs,
                                std::span<const SharedMemorySlice> shared_memory_inputs,
                                inference::ModelInferResponse* out);

}  // namespace weft
