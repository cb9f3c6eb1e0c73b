// Fuzzes config parsing and validation (repository/pbtxt/config_pbtxt.cc), in both forms a config comes in:
// config.pbtxt (protobuf's text format against proto/model_config.proto) and JSON (the repository API's load
// override: protobuf's JSON mapping, unknown fields and enum names found by walking the JSON against the schema);
// then the conversion to ModelConfig, ValidateModelConfig (model/model_config.cc, model_warmup included) and the
// JSON rendering, and the weft.rollout.* policy (rollout/rollout_spec.cc). For a config that loads: its rendered JSON
// must load again as the same config (the config endpoint's answer is what the load API takes back), and what the
// server does with requests for it: raw binary bodies (DecodeRawInferRequest, which sizes the body by the config's
// dims) and the engine's PrepareInputs.
//
// Input: the text of a config.pbtxt or a config as JSON. Every input goes to both parsers: each refuses the other's
// form within its first bytes, so this costs little, and no seed changes meaning.

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/log.h"
#include "engine/request_validation.h"
#include "frontend/http/infer_codec.h"
#include "fuzz/fuzz_target.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "rollout/rollout_spec.h"

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

// The rendered JSON of a config that loaded loads again as the same config (strings are UTF-8: a config with other
// bytes is refused), and from the second rendering on, as the same JSON too: a double -0 becomes 0 on the way, in
// fields ModelConfig does not hold.
void CheckJsonRoundTrip(const ModelConfig& config) {
  Result<ModelConfig> again = ParseModelConfigJson(config.json, "json", "");
  WEFT_CHECK(again.ok()) << "the JSON of a config that loaded does not load: " << again.status().message() << "\n"
                         << config.json;
  ModelConfig a = config;
  ModelConfig b = *again;
  a.json.clear();
  b.json.clear();
  WEFT_CHECK(a == b) << "the JSON of a config loads as another config:\n" << config.json << "\n" << again->json;
  Result<ModelConfig> third = ParseModelConfigJson(again->json, "json", "");
  WEFT_CHECK(third.ok() && *third == *again) << "the JSON's JSON differs:\n" << again->json;
}

void Serve(Result<ModelConfig> config) {
  if (!config.ok()) return;
  CheckJsonRoundTrip(*config);
  if (config->name.empty()) config->name = "m";  // the repository names it after its directory
  WEFT_CHECK(ValidateModelConfig(*config).ok()) << "a config that loaded does not validate";
  // The rollout policy the live repository reads from its parameters: a policy it accepts validates.
  Result<std::optional<RolloutSpec>> policy = ParseRolloutPolicy(*config);
  if (policy.ok() && *policy) {
    WEFT_CHECK(ValidateRolloutSpec(**policy).ok()) << "a rollout policy does not validate";
  }
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
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  weft::Serve(weft::ParseModelConfigText(input, "config.pbtxt"));
  weft::Serve(weft::ParseModelConfigJson(input, "parameters.config", ""));
  return 0;
}
