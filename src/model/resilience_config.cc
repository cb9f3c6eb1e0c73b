#include "model/resilience_config.h"

#include <array>
#include <charconv>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "base/json_string.h"
#include "model/parameter_text.h"

namespace weft {
namespace {

constexpr std::string_view kBreakerPrefix = "weft.breaker.";
constexpr std::string_view kEnabledKey = "weft.breaker.enabled";
constexpr std::string_view kFailureRateKey = "weft.breaker.failure_rate";
constexpr std::string_view kFallbackKey = "weft.fallback_models";
constexpr std::string_view kDegradeKey = "weft.degrade_to";
constexpr std::string_view kExecutionTimeoutKey = "weft.execution_timeout_ms";

constexpr int64_t kMaxMillis = BreakerLimits::kMaxDuration.count();

// An integer field of BreakerOptions: its key, its range, and how to read and write it.
struct IntegerField {
  std::string_view key;
  int64_t min;
  int64_t max;
  std::string_view expected;  // for messages: "an integer in [1, 10000]"
  int64_t (*get)(const BreakerOptions&);
  void (*set)(BreakerOptions&, int64_t);
};

const std::array<IntegerField, 7>& IntegerFields() {
  static const std::array<IntegerField, 7> fields = {{
      {"weft.breaker.window_calls", 1, BreakerLimits::kMaxWindowCalls, "an integer in [1, 10000]",
       [](const BreakerOptions& o) -> int64_t { return o.window_calls; },
       [](BreakerOptions& o, int64_t v) { o.window_calls = static_cast<uint32_t>(v); }},
      {"weft.breaker.window_ms", 0, kMaxMillis, "milliseconds in [0, 3600000] (0 = a count-based window)",
       [](const BreakerOptions& o) -> int64_t { return o.window.count(); },
       [](BreakerOptions& o, int64_t v) { o.window = std::chrono::milliseconds(v); }},
      {"weft.breaker.minimum_calls", 1, BreakerLimits::kMaxWindowCalls, "an integer in [1, 10000]",
       [](const BreakerOptions& o) -> int64_t { return o.minimum_calls; },
       [](BreakerOptions& o, int64_t v) { o.minimum_calls = static_cast<uint32_t>(v); }},
      {"weft.breaker.consecutive_failures", 0, BreakerLimits::kMaxWindowCalls, "an integer in [0, 10000] (0 = off)",
       [](const BreakerOptions& o) -> int64_t { return o.consecutive_failures; },
       [](BreakerOptions& o, int64_t v) { o.consecutive_failures = static_cast<uint32_t>(v); }},
      {"weft.breaker.open_ms", 1, kMaxMillis, "milliseconds in [1, 3600000]",
       [](const BreakerOptions& o) -> int64_t { return o.open_duration.count(); },
       [](BreakerOptions& o, int64_t v) { o.open_duration = std::chrono::milliseconds(v); }},
      {"weft.breaker.max_open_ms", 1, kMaxMillis, "milliseconds in [1, 3600000]",
       [](const BreakerOptions& o) -> int64_t { return o.max_open_duration.count(); },
       [](BreakerOptions& o, int64_t v) { o.max_open_duration = std::chrono::milliseconds(v); }},
      {"weft.breaker.half_open_probes", 1, BreakerLimits::kMaxHalfOpenProbes, "an integer in [1, 1000]",
       [](const BreakerOptions& o) -> int64_t { return o.half_open_probes; },
       [](BreakerOptions& o, int64_t v) { o.half_open_probes = static_cast<uint32_t>(v); }},
  }};
  return fields;
}

Status ParseBreakerParameter(std::string_view key, std::string_view raw, BreakerOptions* options) {
  const std::string_view value = TrimParameter(raw);
  if (key == kEnabledKey) {
    if (value != "true" && value != "false") return BadParameter(key, "true or false", QuotedParameter(raw));
    options->enabled = value == "true";
    return Status::Ok();
  }
  if (key == kFailureRateKey) {
    std::optional<double> rate = ParseParameterDouble(value);
    if (!rate || !(*rate > 0 && *rate <= 1)) return BadParameter(key, "a number in (0, 1]", QuotedParameter(raw));
    options->failure_rate = *rate;
    return Status::Ok();
  }
  for (const IntegerField& field : IntegerFields()) {
    if (key != field.key) continue;
    std::optional<uint64_t> parsed = ParseParameterUnsigned(value);
    if (!parsed || *parsed < static_cast<uint64_t>(field.min) || *parsed > static_cast<uint64_t>(field.max)) {
      return BadParameter(key, field.expected, QuotedParameter(raw));
    }
    field.set(*options, static_cast<int64_t>(*parsed));
    return Status::Ok();
  }
  return InvalidArgument("parameters " + QuotedParameter(key) +
                         ": unknown circuit breaker parameter (known: enabled, window_calls, window_ms, "
                         "minimum_calls, failure_rate, consecutive_failures, open_ms, max_open_ms, half_open_probes)");
}

// A stand-in names a directory of the repository, and a config may come from a client (the load API): nothing that
// could point elsewhere (an absolute path, "..", a subdirectory) or at a hidden entry.
Status CheckStandInName(const std::string& where, std::string_view name) {
  if (name.front() == '.' || name.find('/') != std::string_view::npos || name.find('\0') != std::string_view::npos) {
    return InvalidArgument(where + QuotedParameter(name) +
                           " is not a model name: it names no directory of the repository");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ParseFallbackModels(std::string_view raw, const std::string& model) {
  std::vector<std::string> names;
  if (TrimParameter(raw).empty()) return names;
  const std::string where = "parameters '" + std::string(kFallbackKey) + "': ";
  std::set<std::string_view> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = raw.find(',', start);
    const std::string_view name =
        TrimParameter(raw.substr(start, comma == std::string_view::npos ? raw.npos : comma - start));
    if (name.empty()) {
      return InvalidArgument(where + "model name " + std::to_string(names.size() + 1) + " is empty in " +
                             QuotedParameter(raw) + " (expected names separated by commas)");
    }
    if (name == model) return InvalidArgument(where + "lists the model itself, " + QuotedParameter(name));
    WEFT_RETURN_IF_ERROR(CheckStandInName(where, name));
    if (!seen.insert(name).second) return InvalidArgument(where + "lists " + QuotedParameter(name) + " twice");
    names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return names;
}

Result<std::string> ParseDegradeTo(std::string_view raw, const std::string& model) {
  const std::string_view name = TrimParameter(raw);
  const std::string where = "parameters '" + std::string(kDegradeKey) + "': ";
  if (name.find(',') != std::string_view::npos)
    return InvalidArgument(where + "names one model, got " + QuotedParameter(raw));
  if (!name.empty() && name == model)
    return InvalidArgument(where + "names the model itself, " + QuotedParameter(name));
  if (!name.empty()) WEFT_RETURN_IF_ERROR(CheckStandInName(where, name));
  return std::string(name);
}

}  // namespace

Status ValidateBreakerOptions(const BreakerOptions& options) {
  for (const IntegerField& field : IntegerFields()) {
    const int64_t value = field.get(options);
    if (value < field.min || value > field.max) return BadParameter(field.key, field.expected, std::to_string(value));
  }
  if (!(options.failure_rate > 0 && options.failure_rate <= 1)) {
    return BadParameter(kFailureRateKey, "a number in (0, 1]", FormatParameterDouble(options.failure_rate));
  }
  if (options.window.count() == 0 && options.minimum_calls > options.window_calls) {
    return InvalidArgument("parameters 'weft.breaker.minimum_calls': " + std::to_string(options.minimum_calls) +
                           " is more than weft.breaker.window_calls (" + std::to_string(options.window_calls) +
                           "): the window would never hold enough calls for a failure-rate decision");
  }
  if (options.max_open_duration < options.open_duration) {
    return InvalidArgument(
        "parameters 'weft.breaker.max_open_ms': " + std::to_string(options.max_open_duration.count()) +
        " is less than weft.breaker.open_ms (" + std::to_string(options.open_duration.count()) + ")");
  }
  return Status::Ok();
}

Result<ResilienceConfig> ParseResilienceConfig(const ModelConfig& config) {
  ResilienceConfig out;
  for (const auto& [key, value] : config.parameters) {
    if (key.starts_with(kBreakerPrefix)) {
      WEFT_RETURN_IF_ERROR(ParseBreakerParameter(key, value, &out.breaker));
    } else if (key == kFallbackKey) {
      WEFT_ASSIGN_OR_RETURN(out.fallback_models, ParseFallbackModels(value, config.name));
    } else if (key == kDegradeKey) {
      WEFT_ASSIGN_OR_RETURN(out.degrade_to, ParseDegradeTo(value, config.name));
    } else if (key == kExecutionTimeoutKey) {
      std::optional<uint64_t> millis = ParseParameterUnsigned(TrimParameter(value));
      if (!millis || *millis > static_cast<uint64_t>(kMaxMillis)) {
        return BadParameter(key, "milliseconds in [0, 3600000] (0 = no limit)", QuotedParameter(value));
      }
      out.execution_timeout = std::chrono::milliseconds(*millis);
    }
  }
  // Each value is in range by now; what is left are the rules between fields.
  WEFT_RETURN_IF_ERROR(ValidateBreakerOptions(out.breaker));
  return out;
}

}  // namespace weft
