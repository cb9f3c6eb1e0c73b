#include "frontend/http/statistics_codec.h"

#include "frontend/http/json_writer.h"

namespace weft {
namespace {

void WriteDuration(JsonWriter& json, std::string_view key, const StatisticDuration& d) {
  json.Key(key);
  json.BeginObject();
  json.Key("count");
  json.Uint(d.count);
  json.Key("ns");
  json.Uint(d.ns);
  json.EndObject();
}

}  // namespace

std::string EncodeModelStatistics(std::span<const VersionStatistics> stats) {
  std::string body;
  JsonWriter json(&body);
  json.BeginObject();
  json.Key("model_stats");
  json.BeginArray();
  for (const VersionStatistics& v : stats) {
    json.BeginObject();
    json.Key("name");
    json.String(v.model);
    json.Key("version");
    json.String(std::to_string(v.version));
    json.Key("last_inference");
    json.Uint(v.last_inference_ms);
    json.Key("inference_count");
    json.Uint(v.inference_count);
    json.Key("execution_count");
    json.Uint(v.execution_count);
    json.Key("inference_stats");
    json.BeginObject();
    WriteDuration(json, "success", v.success);
    WriteDuration(json, "fail", v.fail);
    WriteDuration(json, "queue", v.queue);
    WriteDuration(json, "compute_input", v.compute_input);
    WriteDuration(json, "compute_infer", v.compute_infer);
    WriteDuration(json, "compute_output", v.compute_output);
    WriteDuration(json, "cache_hit", {});
    WriteDuration(json, "cache_miss", {});
    json.EndObject();
    json.Key("batch_stats");
    json.BeginArray();
    for (const BatchStatistics& b : v.batch_stats) {
      json.BeginObject();
      json.Key("batch_size");
      json.Uint(b.batch_size);
      WriteDuration(json, "compute_input", b.compute_input);
      WriteDuration(json, "compute_infer", b.compute_infer);
      WriteDuration(json, "compute_output", b.compute_output);
      json.EndObject();
    }
    json.EndArray();
    json.Key("memory_usage");
    json.BeginArray();
    json.EndArray();
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return body;
}

}  // namespace weft
