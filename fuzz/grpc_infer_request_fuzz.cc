// Fuzzes the gRPC frontend's inference request decoding (frontend/grpc/infer_message.cc) from the wire: the
// bytes of a serialized inference.ModelInferRequest are parsed as gRPC parses them (ParseFromArray) and decoded
// by DecodeModelInferRequest (typed contents, raw_input_contents, parameters, shared memory); then, for a request
// that names one of the fixed models, what the server does next: the engine's PrepareInputs and, these being
// identity models, the response encoding, which writes the outputs placed in shared memory.
//
// Input: the message's bytes, nothing else. Shared memory is on, with one region "region" of ShmObject::kBytes
// bytes for inputs and outputs to name.

#include <google/protobuf/stubs/logging.h>

#include <memory>
#include <span>
#include <string>

#include "base/log.h"
#include "frontend/grpc/infer_message.h"
#include "fuzz/fixed_models.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/shm_fixture.h"

namespace weft {
namespace {

void Serve(SharedMemoryRegistry* shared_memory, const uint8_t* data, size_t size) {
  auto message = std::make_shared<inference::ModelInferRequest>();
  // gRPC answers a message that does not parse itself; the service never sees it.
  if (!message->ParseFromArray(data, static_cast<int>(size))) return;
  Result<DecodedModelInfer> decoded = DecodeModelInferRequest(message, SteadyTime(), shared_memory);
  if (!decoded.ok()) return;
  for (const Tensor& input : decoded->request->inputs) CheckTensor(input);
  const ModelConfig* model = FindFixedModel(decoded->request->model_name);
  if (model == nullptr) return;  // NOT_FOUND from the engine

  Result<InferenceResponse> response = ServeAsIdentity(*model, *decoded->request);
  if (!response.ok()) return;
  for (const Tensor& output : response->outputs) CheckTensor(output);
  inference::ModelInferResponse out;
  Status encoded = EncodeModelInferResponse(*response, decoded->request->requested_outputs,
                                            decoded->shared_memory_outputs, decoded->shared_memory_inputs, &out);
  if (!encoded.ok()) return;
  std::string wire = out.SerializeAsString();  // as gRPC sends it
  ReadEveryByte(std::as_bytes(std::span(wire)));
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  // protobuf logs every string field that is not UTF-8 as it parses; at fuzzing rates that is most of the time.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* region = new weft::RegisteredRegion();
  region->Reset();
  weft::Serve(region->registry(), data, size);
  return 0;
}
