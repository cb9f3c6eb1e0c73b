// Fuzzes the HTTP frontend's inference request decoding (frontend/http/infer_request_decoder.cc): the KServe v2
// JSON body, the binary tensor data extension and the raw binary body, then what the server does next with a
// decoded request for one of the fixed models: the engine's PrepareInputs and, these being identity models, the
// response encoding, which writes the outputs placed in shared memory.
//
// Input framing (one request as the server receives it):
//   line 1: the model the URL names (POST v2/models/<model>/infer), one of FindFixedModel's names
//   line 2: the Inference-Header-Content-Length header: empty when absent, "binary" for the binary extension with
//           the header computed (below), else the header's value as sent ("0": a raw body)
//   the rest: the request body; with "binary", the JSON up to the first '\n' and the binary section after it,
//           sent as one body with the JSON's length in the header. A mutation that changes the JSON's length then
//           keeps the two parts apart, as a real client's header would.
// Shared memory is on, with one region "region" of ShmObject::kBytes bytes for inputs and outputs to name.

#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "frontend/http/infer_codec.h"
#include "fuzz/fixed_models.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/shm_fixture.h"

namespace weft {
namespace {

void Serve(SharedMemoryRegistry* shared_memory, std::string_view model_name, std::string_view header,
           std::string_view rest) {
  std::string bytes(rest);
  std::optional<size_t> json_size;
  if (header == "binary") {
    json_size = std::min(bytes.find('\n'), bytes.size());
    if (*json_size < bytes.size()) bytes.erase(*json_size, 1);
  } else if (!header.empty()) {
    // As InferenceService's JsonSizeHeader: anything but a decimal size is answered 400 before decoding.
    size_t size = 0;
    auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), size);
    if (error != std::errc() || end != header.data() + header.size()) return;
    json_size = size;
  }
  std::shared_ptr<RequestBody> body = MakeRequestBody(bytes, json_size.value_or(0));
  InferBody infer_body{body->bytes(), body, json_size, shared_memory};
  const ModelConfig* model = FindFixedModel(model_name);

  const bool raw = json_size == size_t{0};
  if (raw && model == nullptr) return;  // the raw form needs the model's config: the server answers 404 first
  Result<DecodedInferRequest> decoded =
      raw ? DecodeRawInferRequest(infer_body, *model, SteadyTime()) : DecodeInferRequest(infer_body, SteadyTime());
  if (!decoded.ok()) return;
  for (const Tensor& input : decoded->request->inputs) CheckTensor(input);
  if (model == nullptr) return;

  Result<InferenceResponse> response = ServeAsIdentity(*model, *decoded->request);
  if (!response.ok()) return;
  for (const Tensor& output : response->outputs) CheckTensor(output);
  Result<EncodedInferResponse> encoded = EncodeInferResponse(*response, decoded->output_format);
  if (!encoded.ok()) return;
  for (const Tensor& output : encoded->binary) CheckTensor(output);
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* region = new weft::RegisteredRegion();
  region->Reset();
  weft::FramedInput input(data, size);
  std::string_view model = input.Line();
  std::string_view header = input.Line();
  weft::Serve(region->registry(), model, header, input.Rest());
  return 0;
}
