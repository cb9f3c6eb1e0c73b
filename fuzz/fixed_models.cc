#include "fuzz/fixed_models.h"

#include <map>
#include <string>
#include <vector>

#include "base/log.h"
#include "engine/request_validation.h"
#include "repository/pbtxt/config_pbtxt.h"

namespace weft {
namespace {

struct TensorSpec {
  std::string_view data_type, dims, reshape = {};
};

std::string TensorEntry(const std::string& name, const TensorSpec& t) {
  std::string entry =
      "{ name: \"" + name + "\" data_type: " + std::string(t.data_type) + " dims: " + std::string(t.dims);
  if (!t.reshape.empty()) entry += " reshape: { shape: " + std::string(t.reshape) + " }";
  return entry + " }";
}

// The config.pbtxt of a model whose outputs OUTPUT<i> mirror its inputs INPUT<i>.
std::string Mirrored(std::string_view name, int max_batch_size, const std::vector<TensorSpec>& tensors) {
  std::string inputs, outputs;
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string separator = i == 0 ? "" : ", ";
    inputs += separator + TensorEntry("INPUT" + std::to_string(i), tensors[i]);
    outputs += separator + TensorEntry("OUTPUT" + std::to_string(i), tensors[i]);
  }
  return "name: \"" + std::string(name) +
         "\" backend: \"weft_builtin\" max_batch_size: " + std::to_string(max_batch_size) + " input [ " + inputs +
         " ] output [ " + outputs + " ]";
}

std::map<std::string, ModelConfig, std::less<>> LoadFixedModels() {
  const std::string texts[] = {
      Mirrored("identity", 0, {{"TYPE_FP32", "[ -1 ]"}}),
      Mirrored("identity_bytes", 0, {{"TYPE_STRING", "[ -1 ]"}}),
      Mirrored("add_sub", 8, {{"TYPE_FP32", "[ 16 ]"}, {"TYPE_FP32", "[ 16 ]"}}),
      Mirrored("image", 4, {{"TYPE_UINT8", "[ 3, -1, -1 ]"}}),
      Mirrored("reshaped", 8, {{"TYPE_INT64", "[ 1 ]", "[ ]"}, {"TYPE_FP16", "[ 2, -1 ]", "[ -1 ]"}}),
      Mirrored("scalar", 0, {{"TYPE_BOOL", "[ 1 ]", "[ ]"}}),
      Mirrored("every_type", 2,
               {{"TYPE_BOOL", "[ -1 ]"},
                {"TYPE_UINT8", "[ -1 ]"},
                {"TYPE_UINT16", "[ -1 ]"},
                {"TYPE_UINT32", "[ -1 ]"},
                {"TYPE_UINT64", "[ -1 ]"},
                {"TYPE_INT8", "[ -1 ]"},
                {"TYPE_INT16", "[ -1 ]"},
                {"TYPE_INT32", "[ -1 ]"},
                {"TYPE_INT64", "[ -1 ]"},
                {"TYPE_FP16", "[ -1 ]"},
                {"TYPE_FP32", "[ -1 ]"},
                {"TYPE_FP64", "[ -1 ]"},
                {"TYPE_BF16", "[ -1 ]"},
                {"TYPE_STRING", "[ -1 ]"}}),
  };
  std::map<std::string, ModelConfig, std::less<>> models;
  for (const std::string& text : texts) {
    Result<ModelConfig> config = ParseModelConfigText(text, "fixed model");
    WEFT_CHECK(config.ok()) << config.status().ToString() << "\n" << text;
    std::string name = config->name;
    models.emplace(std::move(name), std::move(config).value());
  }
  return models;
}

}  // namespace

const ModelConfig* FindFixedModel(std::string_view name) {
  static const auto* models = new std::map<std::string, ModelConfig, std::less<>>(LoadFixedModels());
  auto it = models->find(name);
  return it == models->end() ? nullptr : &it->second;
}

Result<InferenceResponse> ServeAsIdentity(const ModelConfig& model, const InferenceRequest& request) {
  WEFT_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, PrepareInputs(model, request));
  int64_t batch_size = BatchSize(model, inputs);
  std::vector<Tensor> outputs;
  for (size_t i = 0; i < inputs.size() && i < model.outputs.size(); ++i) {
    outputs.push_back(inputs[i]);
    outputs.back().set_name(model.outputs[i].name);
  }
  InferenceResponse response;
  response.model_name = model.name;
  response.model_version = 1;
  response.id = request.id;
  // Every model's first output has labels, fewer than most outputs have classes, for the classification extension.
  static const OutputLabels* labels = new OutputLabels{{"OUTPUT0", {"zero", "", "two"}}};
  WEFT_ASSIGN_OR_RETURN(response.outputs, FinishOutputs(model, *labels, request, std::move(outputs), batch_size));
  return response;
}

}  // namespace weft
