#include "model/resilience_config.h"

#include <array>
#include <charconv>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>

#include "base/json_string.h"

namespace weft {
namespace {

constexpr std::string_view kBreakerPrefix = "weft.breaker.";
constexpr std::string_view kEnabledKey = "weft.breaker.enabled";
constexpr std::string_view kFailureRateKey = "weft.breaker.failure_rate";
constexpr std::string_view kFallbackKey = "weft.fallback_models";
constexpr std::string_view kDegradeKey = "weft.degrade_to";
constexpr std::string_view kExecutionTimeoutKey = "weft.execution_timeout_ms";
// A config may come from a client (the repository API's load override): messages quote at most this much of it.
constexpr size_t kMaxQuotedBytes = 64;

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

std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

std::string Quoted(std::string_view value) { return "'" + TruncateUtf8(value, kMaxQuotedBytes) + "'"; }

Status BadValue(std::string_view key, std::string_view expected, std::string_view got) {
  return InvalidArgument("parameters '" + std::string(key) + "': expected " + std::string(expected) + ", got " +
                         std::string(got));
}

// The shortest text that reads back as `value` ("0.5", "1e-09", "nan").
std::string FormatDouble(double value) {
  std::array<char, 64> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::string("?");
}

// The whole of `text` as a decimal integer without a sign; nullopt for anything else or on overflow.
std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseDouble(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Status ParseBreakerParameter(std::string_view key, std::string_view raw, BreakerOptions* options) {
  const std::string_view value = Trim(raw);
  if (key == kEnabledKey) {
    if (value != "true" && value != "false") return BadValue(key, "true or false", Quoted(raw));
    options->enabled = value == "true";
    return Status::Ok();
  }
  if (key == kFailureRateKey) {
    std::optional<double> rate = ParseDouble(value);
    if (!rate || !(*rate > 0 && *rate <= 1)) return BadValue(key, "a number in (0, 1]", Quoted(raw));
    options->failure_rate = *rate;
    return Status::Ok();
  }
  for (const IntegerField& field : IntegerFields()) {
    if (key != field.key) continue;
    std::optional<uint64_t> parsed = ParseUnsigned(value);
    if (!parsed || *parsed < static_cast<uint64_t>(field.min) || *parsed > static_cast<uint64_t>(field.max)) {
      return BadValue(key, field.expected, Quoted(raw));
    }
    field.set(*options, static_cast<int64_t>(*parsed));
    return Status::Ok();
  }
  return InvalidArgument("parameters " + Quoted(key) +
                         ": unknown circuit breaker parameter (known: enabled, window_calls, window_ms, "
                         "minimum_calls, failure_rate, consecutive_failures, open_ms, max_open_ms, half_open_probes)");
}

Result<std::vector<std::string>> ParseFallbackModels(std::string_view raw, const std::string& model) {
  std::vector<std::string> names;
  if (Trim(raw).empty()) return names;
  const std::string where = "parameters '" + std::string(kFallbackKey) + "': ";
  std::set<std::string_view> seen;
  size_t start = 0;
  while (true) {
    const size_t comma = raw.find(',', start);
    const std::string_view name = Trim(raw.substr(start, comma == std::string_view::npos ? raw.npos : comma - start));
    if (name.empty()) {
      return InvalidArgument(where + "model name " + std::to_string(names.size() + 1) + " is empty in " + Quoted(raw) +
                             " (expected names separated by commas)");
    }
    if (name == model) return InvalidArgument(where + "lists the model itself, " + Quoted(name));
    if (!seen.insert(name).second) return InvalidArgument(where + "lists " + Quoted(name) + " twice");
    names.emplace_back(name);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return names;
}

Result<std::string> ParseDegradeTo(std::string_view raw, const std::string& model) {
  const std::string_view name = Trim(raw);
  const std::string where = "parameters '" + std::string(kDegradeKey) + "': ";
  if (name.find(',') != std::string_view::npos) return InvalidArgument(where + "names one model, got " + Quoted(raw));
  if (!name.empty() && name == model) return InvalidArgument(where + "names the model itself, " + Quoted(name));
  return std::string(name);
}

}  // namespace

Status ValidateBreakerOptions(const BreakerOptions& options) {
  for (const IntegerField& field : IntegerFields()) {
    const int64_t value = field.get(options);
    if (value < field.min || value > field.max) return BadValue(field.key, field.expected, std::to_string(value));
  }
  if (!(options.failure_rate > 0 && options.failure_rate <= 1)) {
    return BadValue(kFailureRateKey, "a number in (0, 1]", FormatDouble(options.failure_rate));
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
      std::optional<uint64_t> millis = ParseUnsigned(Trim(value));
      if (!millis || *millis > static_cast<uint64_t>(kMaxMillis)) {
        return BadValue(key, "milliseconds in [0, 3600000] (0 = no limit)", Quoted(value));
      }
      out.execution_timeout = std::chrono::milliseconds(*millis);
    }
  }
  // Each value is in range by now; what is left are the rules between fields.
  WEFT_RETURN_IF_ERROR(ValidateBreakerOptions(out.breaker));
  return out;
}

}  // namespace weft
