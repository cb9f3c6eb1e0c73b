#include "rollout/rollout_spec.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

#include "base/json_string.h"
#include "model/parameter_text.h"

namespace weft {
namespace {

constexpr std::string_view kPrefix = "weft.rollout.";
constexpr std::string_view kStagesKey = "weft.rollout.stages";
constexpr std::string_view kMinRequestsKey = "weft.rollout.min_requests";
constexpr std::string_view kMinDurationKey = "weft.rollout.min_duration_ms";
constexpr std::string_view kStickyKey = "weft.rollout.sticky_key";
constexpr std::string_view kShadowInFlightKey = "weft.rollout.shadow_max_in_flight";
constexpr std::string_view kOnRollbackKey = "weft.rollout.on_rollback";

// A criterion: its key, its range, and where it lives in RolloutCriteria. Every range is closed and finite.
struct CriterionField {
  std::string_view key;
  std::string_view field;  // for ValidateRolloutSpec's messages, as the JSON of the API names it
  double min;
  double max;
  std::string_view expected;
  double RolloutCriteria::*member;
};

constexpr double kUnbounded = std::numeric_limits<double>::max();

const std::array<CriterionField, 6>& CriterionFields() {
  static const std::array<CriterionField, 6> fields = {{
      {"weft.rollout.max_error_rate_increase", "criteria.max_error_rate_increase", 0, 1, "a number in [0, 1]",
       &RolloutCriteria::max_error_rate_increase},
      {"weft.rollout.max_p99_ratio", "criteria.max_p99_ratio", 1, kUnbounded, "a finite number >= 1",
       &RolloutCriteria::max_p99_ratio},
      {"weft.rollout.max_divergence_rate", "criteria.max_divergence_rate", 0, 1, "a number in [0, 1]",
       &RolloutCriteria::max_divergence_rate},
      {"weft.rollout.abs_tolerance", "criteria.abs_tolerance", 0, kUnbounded, "a finite number >= 0",
       &RolloutCriteria::abs_tolerance},
      {"weft.rollout.rel_tolerance", "criteria.rel_tolerance", 0, kUnbounded, "a finite number >= 0",
       &RolloutCriteria::rel_tolerance},
      {"weft.rollout.min_top1_agreement", "criteria.min_top1_agreement", 0, 1, "a number in [0, 1]",
       &RolloutCriteria::min_top1_agreement},
  }};
  return fields;
}

// NaN fails every comparison, so it is out of every range; infinities are beyond kUnbounded.
bool InRange(double value, double min, double max) { return value >= min && value <= max; }
bool ValidShare(double share) { return share > 0 && share <= 1; }

Status BadField(std::string_view field, std::string_view expected, std::string_view got) {
  return InvalidArgument("rollout " + std::string(field) + ": expected " + std::string(expected) + ", got " +
                         std::string(got));
}

// The whole of `text` as a finite number: no field accepts "nan" or "inf".
std::optional<double> ParseFinite(std::string_view text) {
  std::optional<double> value = ParseParameterDouble(text);
  if (!value || !std::isfinite(*value)) return std::nullopt;
  return value;
}

std::optional<RolloutStage::Kind> ParseKind(std::string_view name) {
  if (name == RolloutStageKindName(RolloutStage::Kind::kShadow)) return RolloutStage::Kind::kShadow;
  if (name == RolloutStageKindName(RolloutStage::Kind::kCanary)) return RolloutStage::Kind::kCanary;
  return std::nullopt;
}

// One "kind:share" of weft.rollout.stages; `number` counts from 1, for messages.
Result<RolloutStage> ParseStage(std::string_view item, size_t number, std::string_view list) {
  const std::string where = "parameters '" + std::string(kStagesKey) + "': stage " + std::to_string(number) + " ";
  const size_t colon = item.find(':');
  if (item.empty() || colon == std::string_view::npos) {
    return InvalidArgument(where + "is " + QuotedParameter(item) + " in " + QuotedParameter(list) +
                           " (expected kind:share, such as canary:0.05)");
  }
  RolloutStage stage;
  const std::string_view kind = TrimParameter(item.substr(0, colon));
  std::optional<RolloutStage::Kind> parsed_kind = ParseKind(kind);
  if (!parsed_kind)
    return InvalidArgument(where + "has kind " + QuotedParameter(kind) + " (expected shadow or canary)");
  stage.kind = *parsed_kind;
  const std::string_view share = TrimParameter(item.substr(colon + 1));
  std::optional<double> parsed_share = ParseFinite(share);
  if (!parsed_share || !ValidShare(*parsed_share)) {
    return InvalidArgument(where + "has share " + QuotedParameter(share) + " (expected a number in (0, 1])");
  }
  stage.share = *parsed_share;
  return stage;
}

// "shadow:1.0, canary:0.05" -> the stages, with RolloutStage's defaults for the rest.
Result<std::vector<RolloutStage>> ParseStages(std::string_view raw) {
  if (TrimParameter(raw).empty()) {
    return InvalidArgument("parameters '" + std::string(kStagesKey) +
                           "': expected at least one stage (kind:share, separated by commas), got ''");
  }
  std::vector<RolloutStage> stages;
  size_t start = 0;
  while (true) {
    const size_t comma = raw.find(',', start);
    const std::string_view item =
        TrimParameter(raw.substr(start, comma == std::string_view::npos ? raw.npos : comma - start));
    if (stages.size() == RolloutLimits::kMaxStages) {
      return InvalidArgument("parameters '" + std::string(kStagesKey) + "': more than " +
                             std::to_string(RolloutLimits::kMaxStages) + " stages in " + QuotedParameter(raw));
    }
    WEFT_ASSIGN_OR_RETURN(RolloutStage stage, ParseStage(item, stages.size() + 1, raw));
    stages.push_back(stage);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return stages;
}

// The values that apply to every stage, applied once the stages are known (keys come in alphabetical order).
struct PerStage {
  std::optional<uint64_t> min_requests;
  std::optional<std::chrono::milliseconds> min_duration;
};

Status ParseParameter(std::string_view key, std::string_view raw, RolloutSpec* spec, PerStage* per_stage) {
  const std::string_view value = TrimParameter(raw);
  for (const CriterionField& field : CriterionFields()) {
    if (key != field.key) continue;
    std::optional<double> parsed = ParseFinite(value);
    if (!parsed || !InRange(*parsed, field.min, field.max))
      return BadParameter(key, field.expected, QuotedParameter(raw));
    spec->criteria.*field.member = *parsed;
    return Status::Ok();
  }
  if (key == kStagesKey) {
    WEFT_ASSIGN_OR_RETURN(spec->stages, ParseStages(raw));
    return Status::Ok();
  }
  if (key == kMinRequestsKey) {
    std::optional<uint64_t> parsed = ParseParameterUnsigned(value);
    if (!parsed || *parsed < 1 || *parsed > RolloutLimits::kMaxMinRequests) {
      return BadParameter(key, "an integer in [1, " + std::to_string(RolloutLimits::kMaxMinRequests) + "]",
                          QuotedParameter(raw));
    }
    per_stage->min_requests = *parsed;
    return Status::Ok();
  }
  if (key == kMinDurationKey) {
    std::optional<uint64_t> parsed = ParseParameterUnsigned(value);
    const auto max = static_cast<uint64_t>(RolloutLimits::kMaxMinDuration.count());
    if (!parsed || *parsed > max) {
      return BadParameter(key, "milliseconds in [0, " + std::to_string(max) + "]", QuotedParameter(raw));
    }
    per_stage->min_duration = std::chrono::milliseconds(*parsed);
    return Status::Ok();
  }
  if (key == kStickyKey) {
    if (value.size() > RolloutLimits::kMaxStickyKey) {
      return BadParameter(key, "a parameter name of at most " + std::to_string(RolloutLimits::kMaxStickyKey) + " bytes",
                          QuotedParameter(raw));
    }
    spec->sticky_key = std::string(value);
    return Status::Ok();
  }
  if (key == kShadowInFlightKey) {
    std::optional<uint64_t> parsed = ParseParameterUnsigned(value);
    if (!parsed || *parsed < 1 || *parsed > RolloutLimits::kMaxShadowInFlight) {
      return BadParameter(key, "an integer in [1, " + std::to_string(RolloutLimits::kMaxShadowInFlight) + "]",
                          QuotedParameter(raw));
    }
    spec->shadow_max_in_flight = static_cast<uint32_t>(*parsed);
    return Status::Ok();
  }
  if (key == kOnRollbackKey) {
    if (value != "keep" && value != "unload") return BadParameter(key, "keep or unload", QuotedParameter(raw));
    spec->unload_on_rollback = value == "unload";
    return Status::Ok();
  }
  return InvalidArgument("parameters " + QuotedParameter(key) +
                         ": unknown rollout parameter (known: stages, min_requests, min_duration_ms, "
                         "max_error_rate_increase, max_p99_ratio, max_divergence_rate, abs_tolerance, rel_tolerance, "
                         "min_top1_agreement, sticky_key, shadow_max_in_flight, on_rollback)");
}

Status ValidateStage(const RolloutStage& stage, size_t index) {
  const std::string field = "stages[" + std::to_string(index) + "]";
  if (!ValidShare(stage.share))
    return BadField(field + ".share", "a number in (0, 1]", FormatParameterDouble(stage.share));
  if (stage.min_requests < 1 || stage.min_requests > RolloutLimits::kMaxMinRequests) {
    return BadField(field + ".min_requests",
                    "an integer in [1, " + std::to_string(RolloutLimits::kMaxMinRequests) + "]",
                    std::to_string(stage.min_requests));
  }
  if (stage.min_duration.count() < 0 || stage.min_duration > RolloutLimits::kMaxMinDuration) {
    return BadField(field + ".min_duration_ms",
                    "milliseconds in [0, " + std::to_string(RolloutLimits::kMaxMinDuration.count()) + "]",
                    std::to_string(stage.min_duration.count()));
  }
  return Status::Ok();
}

}  // namespace

std::string_view RolloutStageKindName(RolloutStage::Kind kind) {
  switch (kind) {
    case RolloutStage::Kind::kShadow: return "shadow";
    case RolloutStage::Kind::kCanary: return "canary";
  }
  return "unknown";
}

std::vector<RolloutStage> DefaultRolloutStages() {
  using Kind = RolloutStage::Kind;
  constexpr std::chrono::milliseconds kTen(10000);
  return {
      {.kind = Kind::kShadow, .share = 1.0, .min_requests = 200, .min_duration = kTen},
      {.kind = Kind::kCanary, .share = 0.05, .min_requests = 100, .min_duration = kTen},
      {.kind = Kind::kCanary, .share = 0.25, .min_requests = 200, .min_duration = kTen},
      {.kind = Kind::kCanary, .share = 0.5, .min_requests = 400, .min_duration = kTen},
  };
}

Status ValidateRolloutSpec(const RolloutSpec& spec) {
  if (spec.candidate < 0) {
    return BadField("candidate", "a version >= 0 (0 = whichever new version appears)", std::to_string(spec.candidate));
  }
  if (spec.stages.empty() || spec.stages.size() > RolloutLimits::kMaxStages) {
    return BadField("stages", "1 to " + std::to_string(RolloutLimits::kMaxStages) + " stages",
                    std::to_string(spec.stages.size()));
  }
  for (size_t i = 0; i < spec.stages.size(); ++i) WEFT_RETURN_IF_ERROR(ValidateStage(spec.stages[i], i));
  for (const CriterionField& field : CriterionFields()) {
    const double value = spec.criteria.*field.member;
    if (!InRange(value, field.min, field.max))
      return BadField(field.field, field.expected, FormatParameterDouble(value));
  }
  if (spec.sticky_key.size() > RolloutLimits::kMaxStickyKey) {
    return BadField("sticky_key", "at most " + std::to_string(RolloutLimits::kMaxStickyKey) + " bytes",
                    std::to_string(spec.sticky_key.size()) + " bytes");
  }
  if (spec.shadow_max_in_flight < 1 || spec.shadow_max_in_flight > RolloutLimits::kMaxShadowInFlight) {
    return BadField("shadow_max_in_flight",
                    "an integer in [1, " + std::to_string(RolloutLimits::kMaxShadowInFlight) + "]",
                    std::to_string(spec.shadow_max_in_flight));
  }
  return Status::Ok();
}

Result<std::optional<RolloutSpec>> ParseRolloutPolicy(const ModelConfig& config) {
  RolloutSpec spec;
  PerStage per_stage;
  bool any = false;
  for (const auto& [key, value] : config.parameters) {
    if (!key.starts_with(kPrefix)) continue;
    any = true;
    WEFT_RETURN_IF_ERROR(ParseParameter(key, value, &spec, &per_stage));
  }
  if (!any) return std::optional<RolloutSpec>();
  for (RolloutStage& stage : spec.stages) {
    if (per_stage.min_requests) stage.min_requests = *per_stage.min_requests;
    if (per_stage.min_duration) stage.min_duration = *per_stage.min_duration;
  }
  // Each value is in range by now; this keeps the two ways into a RolloutSpec to one set of rules.
  WEFT_RETURN_IF_ERROR(ValidateRolloutSpec(spec));
  return std::optional<RolloutSpec>(std::move(spec));
}

}  // namespace weft
