// Fuzzes config.pbtxt parsing and validation (repository/pbtxt/config_pbtxt.cc): protobuf's text format against
// proto/model_config.proto, the conversion to ModelConfig, ValidateModelConfig (model/model_config.cc) and the
// JSON rendering; then, for a config that loads, what the server does with requests for it: raw binary bodies
// (DecodeRawInferRequest, which sizes the body by the config's dims) and the engine's PrepareInputs.
//
// Input: the text of a config.pbtxt, nothing else.

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/log.h"
#include "engine/request_validation.h"
#include "frontend/http/infer_codec.h"
#include "fuzz/fuzz_target.h"
#include "repository/pbtxt/config_pbtxt.h"

namespace weft {
namespace {

// Raw bodies are at most this large.
constexpr uint64_t kMaxRawBody = 1 << 16;

// The size of a raw body that fills the first input of `config` with its variable dims at 1 (batch 1), or 0 when
// that is over kMaxRawBody. Computed here independently of the decoder, with checked arithmetic.
uint64_t FittingRawBodySize(const ModelConfig& config) {
  const TensorConfig& input = config.inputs.front();
  uint64_t size = std::max<uint64_t>(1, DataTypeSize(input.data_type));
  for (int64_t d : input.dims) {
    if (d > 0 && __builtin_mul_overflow(size, static_cast<uint64_t>(d), &size)) return 0;
  }
  return size > kMaxRawBody ? 0 : size;
}

void Serve(std::string_view text) {
  Result<ModelConfig> config = ParseModelConfigText(text, "config.pbtxt");
  if (!config.ok()) return;
  if (config->name.empty()) config->name = "m";  // the repository names it after its directory
  WEFT_CHECK(ValidateModelConfig(*config).ok()) << "a config that loaded does not validate";
  // Empty, one byte, one element, and one that fits the first input.
  const uint64_t element = std::max<uint64_t>(1, DataTypeSize(config->inputs.front().data_type));
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, element, FittingRawBodySize(*config)}) {
    std::shared_ptr<RequestBody> body = MakeRequestBody(std::string(size, '\x01'), 0);
    Result<DecodedInferRequest> decoded =
        DecodeRawInferRequest({body->bytes(), body, size_t{0}}, *config, SteadyTime());
    if (!decoded.ok()) continue;
    for (const Tensor& input : decoded->request->inputs) CheckTensor(input);
    Result<std::vector<Tensor>> prepared = PrepareInputs(*config, *decoded->request);
    if (!prepared.ok()) continue;
    for (const Tensor& input : *prepared) CheckTensor(input);
  }
}

}  // namespace
}  // namespace weft

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  weft::SetLogLevel(weft::LogLevel::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  weft::Serve(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
