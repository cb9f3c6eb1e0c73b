#include "frontend/grpc/model_queries.h"

#include <optional>

#include "frontend/grpc/infer_message.h"
#include "model_config.pb.h"
#include "repository/pbtxt/config_pbtxt.h"

namespace weft {

namespace {

// A model's config for metadata and config: a given version must exist (its config is served even when it
// failed to load); no version = the model's config whatever its state.
Result<ModelConfig> ConfigFor(const Engine& engine, const std::string& model, const std::string& version_text) {
  WEFT_ASSIGN_OR_RETURN(int64_t version, ParseModelVersion(model, version_text));
  if (version != 0) {
    auto found = engine.FindVersion(model, version);
    if (found.ok()) return (*found)->config;
    if (found.status().code() == StatusCode::kNotFound) return found.status();
  }
  return engine.FindConfig(model);
}

void AddTensorMetadata(const ModelConfig& config, const TensorConfig& t,
                       inference::ModelMetadataResponse::TensorMetadata* out) {
  out->set_name(t.name);
  out->set_datatype(std::string(DataTypeName(t.data_type)));
  for (int64_t d : FullShape(config, t)) out->add_shape(d);
}

// A config built in code has no JSON: the fields the protocol's clients read are rendered from the struct.
void ConfigFromFields(const ModelConfig& config, inference::ModelConfig* out) {
  out->set_name(config.name);
  out->set_platform(config.platform);
  out->set_backend(config.backend);
  out->set_max_batch_size(config.max_batch_size);
  auto type_of = [](DataType t) {
    inference::DataType value = inference::TYPE_INVALID;
    inference::DataType_Parse(std::string(DataTypeConfigName(t)), &value);
    return value;
  };
  for (const TensorConfig& t : config.inputs) {
    auto* input = out->add_input();
    input->set_name(t.name);
    input->set_data_type(type_of(t.data_type));
    for (int64_t d : t.dims) input->add_dims(d);
  }
  for (const TensorConfig& t : config.outputs) {
    auto* output = out->add_output();
    output->set_name(t.name);
    output->set_data_type(type_of(t.data_type));
    for (int64_t d : t.dims) output->add_dims(d);
  }
}

void SetDuration(inference::StatisticDuration* out, const StatisticDuration& d) {
  out->set_count(d.count);
  out->set_ns(d.ns);
}

void AddVersionStatistics(const VersionStatistics& v, inference::ModelStatisticsResponse* response) {
  auto* stats = response->add_model_stats();
  stats->set_name(v.model);
  stats->set_version(std::to_string(v.version));
  stats->set_inference_count(v.inference_count);
  stats->set_execution_count(v.execution_count);
  auto* infer = stats->mutable_inference_stats();
  SetDuration(infer->mutable_success(), v.success);
  SetDuration(infer->mutable_fail(), v.fail);
  SetDuration(infer->mutable_queue(), v.queue);
  SetDuration(infer->mutable_compute_input(), v.compute_input);
  SetDuration(infer->mutable_compute_infer(), v.compute_infer);
  SetDuration(infer->mutable_compute_output(), v.compute_output);
  stats->set_last_inference(v.last_inference_ms);
  for (const BatchStatistics& b : v.batch_stats) {
    auto* batch = stats->add_batch_stats();
    batch->set_batch_size(b.batch_size);
    SetDuration(batch->mutable_compute_input(), b.compute_input);
    SetDuration(batch->mutable_compute_infer(), b.compute_infer);
    SetDuration(batch->mutable_compute_output(), b.compute_output);
  }
}

}  // namespace

Status FillModelMetadata(const Engine& engine, const inference::ModelMetadataRequest& request,
                         inference::ModelMetadataResponse* response) {
  WEFT_ASSIGN_OR_RETURN(ModelConfig config, ConfigFor(engine, request.name(), request.version()));
  response->set_name(config.name);
  for (int64_t v : engine.ReadyVersions(request.name())) response->add_versions(std::to_string(v));
  response->set_platform(config.platform.empty() ? config.backend : config.platform);
  for (const TensorConfig& t : config.inputs) AddTensorMetadata(config, t, response->add_inputs());
  for (const TensorConfig& t : config.outputs) AddTensorMetadata(config, t, response->add_outputs());
  return Status::Ok();
}

Status FillModelConfig(const Engine& engine, const inference::ModelConfigRequest& request,
                       inference::ModelConfigResponse* response) {
  WEFT_ASSIGN_OR_RETURN(ModelConfig config, ConfigFor(engine, request.name(), request.version()));
  inference::ModelConfig* out = response->mutable_config();
  if (config.json.empty()) {
    ConfigFromFields(config, out);
    return Status::Ok();
  }
  return FillServedConfig(config, out);
}

Status FillModelStatistics(const Engine& engine, const inference::ModelStatisticsRequest& request,
                           inference::ModelStatisticsResponse* response) {
  int64_t version = 0;
  if (!request.name().empty()) {
    WEFT_ASSIGN_OR_RETURN(version, ParseModelVersion(request.name(), request.version()));
  } else if (!request.version().empty()) {
    return InvalidArgument("a version needs a model name");
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<VersionStatistics> all, engine.Statistics(request.name(), version));
  for (const VersionStatistics& v : all) AddVersionStatistics(v, response);
  return Status::Ok();
}

}  // namespace weft
