#include "frontend/http/rollout_codec.h"

#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "frontend/http/json_writer.h"

namespace weft {
namespace {

namespace dom = simdjson::dom;

// The largest magnitude a number of the request may have. No share, rate, ratio or tolerance means anything beyond
// it, and a double from 2^64 up may be written (std::to_chars, shortest form) as an integer literal that simdjson
// does not read back, which would break the round trip through EncodeRolloutSpec.
constexpr double kMaxNumber = 1e9;

// The criteria by name, for decoding and encoding alike.
constexpr std::pair<std::string_view, double RolloutCriteria::*> kCriteria[] = {
    {"max_error_rate_increase", &RolloutCriteria::max_error_rate_increase},
    {"max_p99_ratio", &RolloutCriteria::max_p99_ratio},
    {"max_divergence_rate", &RolloutCriteria::max_divergence_rate},
    {"abs_tolerance", &RolloutCriteria::abs_tolerance},
    {"rel_tolerance", &RolloutCriteria::rel_tolerance},
    {"min_top1_agreement", &RolloutCriteria::min_top1_agreement},
};

std::string_view OnRollbackName(bool unload) { return unload ? "unload" : "keep"; }

// For messages: "'share' must be a number, not a string".
std::string_view TypeName(dom::element_type type) {
  switch (type) {
    case dom::element_type::ARRAY: return "an array";
    case dom::element_type::OBJECT: return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64: return "an integer";
    case dom::element_type::DOUBLE: return "a number with a fraction or an exponent";
    case dom::element_type::STRING: return "a string";
    case dom::element_type::BOOL: return "a boolean";
    case dom::element_type::NULL_VALUE: return "null";
  }
  return "an unknown type";
}

Status WrongType(const std::string& name, std::string_view expected, dom::element value) {
  return InvalidArgument("'" + name + "' must be " + std::string(expected) + ", not " +
                         std::string(TypeName(value.type())));
}

// Records `key` (named `prefix` + `key` in messages) as seen in its object: a key given twice is an error rather
// than "the last one wins". The callers reject an unknown key at once, so `seen` stays as small as the known keys.
Status FirstTime(std::string_view prefix, std::string_view key, std::vector<std::string_view>* seen) {
  if (std::find(seen->begin(), seen->end(), key) != seen->end()) {
    return InvalidArgument("key '" + std::string(prefix) + std::string(key) + "' is given twice");
  }
  seen->push_back(key);
  return Status::Ok();
}

Status UnknownKey(std::string_view prefix, std::string_view key, std::string_view known) {
  return InvalidArgument("unknown key '" + std::string(prefix) + std::string(key) + "' (known: " + std::string(known) +
                         ")");
}

// An integer in [min, max], checked before the caller narrows it.
Result<int64_t> ReadInteger(dom::element value, const std::string& name, int64_t min, int64_t max) {
  const std::string expected = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  switch (value.type()) {
    case dom::element_type::INT64: {
      const int64_t v = value.get_int64().value_unsafe();
      if (v < min || v > max) return InvalidArgument("'" + name + "' must be " + expected);
      return v;
    }
    case dom::element_type::UINT64:  // above INT64_MAX
      return InvalidArgument("'" + name + "' must be " + expected);
    default: return WrongType(name, expected, value);
  }
}

// Any JSON number, as a double of magnitude at most kMaxNumber.
Result<double> ReadNumber(dom::element value, const std::string& name) {
  double v = 0;
  if (value.get_double().get(v)) return WrongType(name, "a number", value);
  if (!(v >= -kMaxNumber && v <= kMaxNumber)) return InvalidArgument("'" + name + "' must be at most 1e9 in magnitude");
  return v;
}

// A view into the parsed document.
Result<std::string_view> ReadString(dom::element value, const std::string& name) {
  std::string_view v;
  if (value.get_string().get(v)) return WrongType(name, "a string", value);
  return v;
}

Result<RolloutStage> DecodeStage(dom::element value, const std::string& name) {
  dom::object object;
  if (value.get_object().get(object)) return WrongType(name, "an object", value);
  const std::string prefix = name + ".";
  RolloutStage stage;
  bool has_kind = false;
  bool has_share = false;
  std::vector<std::string_view> seen;
  for (dom::key_value_pair field : object) {
    const std::string_view key = field.key;
    WEFT_RETURN_IF_ERROR(FirstTime(prefix, key, &seen));
    if (key == "kind") {
      WEFT_ASSIGN_OR_RETURN(std::string_view kind, ReadString(field.value, prefix + "kind"));
      if (kind == RolloutStageKindName(RolloutStage::Kind::kShadow)) {
        stage.kind = RolloutStage::Kind::kShadow;
      } else if (kind == RolloutStageKindName(RolloutStage::Kind::kCanary)) {
        stage.kind = RolloutStage::Kind::kCanary;
      } else {
        return InvalidArgument("'" + prefix + "kind' must be \"shadow\" or \"canary\"");
      }
      has_kind = true;
    } else if (key == "share") {
      WEFT_ASSIGN_OR_RETURN(stage.share, ReadNumber(field.value, prefix + "share"));
      has_share = true;
    } else if (key == "min_requests") {
      WEFT_ASSIGN_OR_RETURN(int64_t n, ReadInteger(field.value, prefix + "min_requests", 1,
                                                   static_cast<int64_t>(RolloutLimits::kMaxMinRequests)));
      stage.min_requests = static_cast<uint64_t>(n);
    } else if (key == "min_duration_ms") {
      WEFT_ASSIGN_OR_RETURN(
          int64_t ms, ReadInteger(field.value, prefix + "min_duration_ms", 0, RolloutLimits::kMaxMinDuration.count()));
      stage.min_duration = std::chrono::milliseconds(ms);
    } else {
      return UnknownKey(prefix, key, "kind, share, min_requests, min_duration_ms");
    }
  }
  if (!has_kind) return InvalidArgument("'" + prefix + "kind' is required (\"shadow\" or \"canary\")");
  if (!has_share) return InvalidArgument("'" + prefix + "share' is required");
  return stage;
}

Status DecodeStages(dom::element value, std::vector<RolloutStage>* out) {
  dom::array array;
  if (value.get_array().get(array)) return WrongType("stages", "an array", value);
  std::vector<RolloutStage> stages;
  for (dom::element element : array) {
    if (stages.size() == RolloutLimits::kMaxStages) {
      return InvalidArgument("'stages' must hold at most " + std::to_string(RolloutLimits::kMaxStages) + " stages");
    }
    WEFT_ASSIGN_OR_RETURN(RolloutStage stage, DecodeStage(element, "stages[" + std::to_string(stages.size()) + "]"));
    stages.push_back(stage);
  }
  *out = std::move(stages);
  return Status::Ok();
}

Status DecodeCriteria(dom::element value, RolloutCriteria* out) {
  dom::object object;
  if (value.get_object().get(object)) return WrongType("criteria", "an object", value);
  std::vector<std::string_view> seen;
  for (dom::key_value_pair field : object) {
    const std::string_view key = field.key;
    WEFT_RETURN_IF_ERROR(FirstTime("criteria.", key, &seen));
    const auto* criterion =
        std::find_if(std::begin(kCriteria), std::end(kCriteria), [&](const auto& c) { return c.first == key; });
    if (criterion == std::end(kCriteria)) {
      return UnknownKey("criteria.", key,
                        "max_error_rate_increase, max_p99_ratio, max_divergence_rate, abs_tolerance, rel_tolerance, "
                        "min_top1_agreement");
    }
    WEFT_ASSIGN_OR_RETURN(out->*criterion->second, ReadNumber(field.value, "criteria." + std::string(key)));
  }
  return Status::Ok();
}

void WriteSpec(const RolloutSpec& spec, JsonWriter* json) {
  json->BeginObject();
  json->Key("candidate");
  json->Int(spec.candidate);
  json->Key("stages");
  json->BeginArray();
  for (const RolloutStage& stage : spec.stages) {
    json->BeginObject();
    json->Key("kind");
    json->String(RolloutStageKindName(stage.kind));
    json->Key("share");
    json->Double(stage.share);
    json->Key("min_requests");
    json->Uint(stage.min_requests);
    json->Key("min_duration_ms");
    json->Int(stage.min_duration.count());
    json->EndObject();
  }
  json->EndArray();
  json->Key("criteria");
  json->BeginObject();
  for (const auto& [name, member] : kCriteria) {
    json->Key(name);
    json->Double(spec.criteria.*member);
  }
  json->EndObject();
  json->Key("sticky_key");
  json->String(spec.sticky_key);
  json->Key("shadow_max_in_flight");
  json->Uint(spec.shadow_max_in_flight);
  json->Key("on_rollback");
  json->String(OnRollbackName(spec.unload_on_rollback));
  json->EndObject();
}

void WriteArm(const ArmFigures& arm, JsonWriter* json) {
  json->BeginObject();
  json->Key("requests");
  json->Uint(arm.requests);
  json->Key("errors");
  json->Uint(arm.errors);
  json->Key("error_rate");
  json->Double(arm.ErrorRate());
  json->Key("p50_ms");
  json->Double(arm.p50_seconds * 1e3);
  json->Key("p99_ms");
  json->Double(arm.p99_seconds * 1e3);
  json->EndObject();
}

void WriteFigures(const StageFigures& figures, JsonWriter* json) {
  json->BeginObject();
  json->Key("elapsed_ms");
  json->Int(std::chrono::duration_cast<std::chrono::milliseconds>(figures.elapsed).count());
  json->Key("primary");
  WriteArm(figures.primary, json);
  json->Key("candidate");
  WriteArm(figures.candidate, json);

  const DivergenceFigures& d = figures.divergence;
  json->Key("divergence");
  json->BeginObject();
  json->Key("compared");
  json->Uint(d.compared);
  json->Key("diverged");
  json->Uint(d.diverged);
  json->Key("divergence_rate");
  json->Double(d.DivergenceRate());
  json->Key("max_abs");
  json->Double(d.max_abs);
  json->Key("max_rel");
  json->Double(d.max_rel);
  json->Key("top1_rows");
  json->Uint(d.top1_rows);
  json->Key("top1_agreement");
  json->Double(d.Top1Agreement());
  json->EndObject();

  json->Key("noise");
  json->BeginObject();
  json->Key("compared");
  json->Uint(figures.noise.compared);
  json->Key("max_abs");
  json->Double(figures.noise.max_abs);
  json->Key("max_rel");
  json->Double(figures.noise.max_rel);
  json->EndObject();

  json->Key("shadow");
  json->BeginObject();
  json->Key("sent");
  json->Uint(figures.shadow_sent);
  json->Key("dropped");
  json->Uint(figures.shadow_dropped);
  json->EndObject();
  json->EndObject();
}

}  // namespace

Result<RolloutSpec> DecodeRolloutRequest(std::span<const std::byte> body) {
  std::string_view text(reinterpret_cast<const char*>(body.data()), body.size());
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return InvalidArgument("the body is empty; a rollout needs at least {\"candidate\": <version>}");
  }
  // A small body: copied into simdjson's padded string.
  simdjson::padded_string json(text);
  dom::parser parser;
  dom::element root;
  if (auto error = parser.parse(json).get(root)) {
    return InvalidArgument(std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  dom::object object;
  if (root.get_object().get(object)) return InvalidArgument("the body must be a JSON object");

  RolloutSpec spec;
  bool has_candidate = false;
  std::vector<std::string_view> seen;
  for (dom::key_value_pair field : object) {
    const std::string_view key = field.key;
    WEFT_RETURN_IF_ERROR(FirstTime("", key, &seen));
    if (key == "candidate") {
      WEFT_ASSIGN_OR_RETURN(spec.candidate,
                            ReadInteger(field.value, "candidate", 1, std::numeric_limits<int64_t>::max()));
      has_candidate = true;
    } else if (key == "stages") {
      WEFT_RETURN_IF_ERROR(DecodeStages(field.value, &spec.stages));
    } else if (key == "criteria") {
      WEFT_RETURN_IF_ERROR(DecodeCriteria(field.value, &spec.criteria));
    } else if (key == "sticky_key") {
      WEFT_ASSIGN_OR_RETURN(std::string_view sticky_key, ReadString(field.value, "sticky_key"));
      spec.sticky_key = std::string(sticky_key);
    } else if (key == "shadow_max_in_flight") {
      WEFT_ASSIGN_OR_RETURN(
          int64_t n, ReadInteger(field.value, "shadow_max_in_flight", 1, int64_t{RolloutLimits::kMaxShadowInFlight}));
      spec.shadow_max_in_flight = static_cast<uint32_t>(n);
    } else if (key == "on_rollback") {
      WEFT_ASSIGN_OR_RETURN(std::string_view on_rollback, ReadString(field.value, "on_rollback"));
      if (on_rollback != OnRollbackName(false) && on_rollback != OnRollbackName(true)) {
        return InvalidArgument("'on_rollback' must be \"keep\" or \"unload\"");
      }
      spec.unload_on_rollback = on_rollback == OnRollbackName(true);
    } else {
      return UnknownKey("", key, "candidate, stages, criteria, sticky_key, shadow_max_in_flight, on_rollback");
    }
  }
  if (!has_candidate) return InvalidArgument("'candidate' is required: the version to roll out");
  WEFT_RETURN_IF_ERROR(ValidateRolloutSpec(spec));
  return spec;
}

std::string EncodeRolloutSpec(const RolloutSpec& spec) {
  std::string body;
  JsonWriter json(&body);
  WriteSpec(spec, &json);
  return body;
}

std::string EncodeRolloutReport(const RolloutReport& report) {
  std::string body;
  JsonWriter json(&body);
  json.BeginObject();
  json.Key("model");
  json.String(report.model);
  json.Key("state");
  json.String(report.state);
  json.Key("automatic");
  json.Bool(report.automatic);
  json.Key("primary");
  json.Int(report.primary);
  json.Key("candidate");
  json.Int(report.candidate);
  json.Key("stage");
  json.Uint(report.stage);
  json.Key("spec");
  WriteSpec(report.spec, &json);
  json.Key("figures");
  WriteFigures(report.figures, &json);
  json.Key("started");
  json.String(report.started);
  if (!report.ended.empty()) {
    json.Key("ended");
    json.String(report.ended);
  }
  json.Key("decisions");
  json.BeginArray();
  for (const RolloutDecisionRecord& decision : report.decisions) {
    json.BeginObject();
    json.Key("time");
    json.String(decision.time);
    json.Key("stage");
    json.Uint(decision.stage);
    json.Key("action");
    json.String(decision.action);
    json.Key("reason");
    json.String(decision.reason);
    json.Key("figures");
    WriteFigures(decision.figures, &json);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
  return body;
}

}  // namespace weft
