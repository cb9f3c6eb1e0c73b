#include "trace/trace_settings.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>
#include <type_traits>

#include "base/json_string.h"

namespace weft {
namespace {

enum class Setting {
  kMode,
  kLevel,
  kRate,
  kCount,
  kParentBased,
  kFile,
  kLogFrequency,
  kUrl,
  kResource,
  kBspMaxQueueSize,
  kBspMaxExportBatchSize,
  kBspScheduleDelay,
};

// One setting's names in the API and in `--trace-config`, and the mode it belongs to (none: every mode's).
struct SettingName {
  Setting setting;
  std::string_view api;
  std::string_view flag;
  std::optional<TraceMode> mode;
};

constexpr SettingName kSettings[] = {
    {Setting::kMode, "trace_mode", "mode", std::nullopt},
    {Setting::kLevel, "trace_level", "level", std::nullopt},
    {Setting::kRate, "trace_rate", "rate", std::nullopt},
    {Setting::kCount, "trace_count", "count", std::nullopt},
    {Setting::kParentBased, "parent_based", "parent_based", std::nullopt},
    {Setting::kFile, "trace_file", "file", TraceMode::kTriton},
    {Setting::kLogFrequency, "log_frequency", "log-frequency", TraceMode::kTriton},
    {Setting::kUrl, "opentelemetry_url", "url", TraceMode::kOpenTelemetry},
    {Setting::kResource, "opentelemetry_resource", "resource", TraceMode::kOpenTelemetry},
    {Setting::kBspMaxQueueSize, "opentelemetry_bsp_max_queue_size", "bsp_max_queue_size", TraceMode::kOpenTelemetry},
    {Setting::kBspMaxExportBatchSize, "opentelemetry_bsp_max_export_batch_size", "bsp_max_export_batch_size",
     TraceMode::kOpenTelemetry},
    {Setting::kBspScheduleDelay, "opentelemetry_bsp_schedule_delay", "bsp_schedule_delay", TraceMode::kOpenTelemetry},
};

const SettingName* ByApiName(std::string_view name) {
  for (const SettingName& s : kSettings) {
    if (s.api == name) return &s;
  }
  return nullptr;
}

const SettingName* ByFlagName(std::string_view name) {
  if (name == "log_frequency") name = "log-frequency";  // Triton's docs spell it both ways
  for (const SettingName& s : kSettings) {
    if (s.flag == name) return &s;
  }
  return nullptr;
}

const SettingName& NameOf(Setting setting) {
  return *std::find_if(std::begin(kSettings), std::end(kSettings),
                       [setting](const SettingName& s) { return s.setting == setting; });
}

std::string_view ModeName(TraceMode mode) { return mode == TraceMode::kTriton ? "triton" : "opentelemetry"; }

std::optional<TraceMode> ParseMode(std::string_view text) {
  if (text == "triton") return TraceMode::kTriton;
  if (text == "opentelemetry") return TraceMode::kOpenTelemetry;
  return std::nullopt;
}

std::string Quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

// The whole of `text` as a T: digits only (and a leading '-' for a signed T), no overflow.
template <typename T>
Result<T> ParseInteger(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) return InvalidArgument(Quoted(text) + " is out of range");
  if (error != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument(Quoted(text) + (std::is_signed_v<T> ? " is not an integer" : " is not an unsigned integer"));
  }
  return value;
}

Result<uint64_t> ParseBounded(std::string_view text, uint64_t min, uint64_t max) {
  WEFT_ASSIGN_OR_RETURN(uint64_t value, ParseInteger<uint64_t>(text));
  if (value < min || value > max) {
    return InvalidArgument(Quoted(text) + " is out of range [" + std::to_string(min) + ", " + std::to_string(max) +
                           "]");
  }
  return value;
}

Result<bool> ParseBool(std::string_view text) {
  if (text == "true") return true;
  if (text == "false") return false;
  return InvalidArgument(Quoted(text) + " is not true or false");
}

// Triton's levels, of which weft records TIMESTAMPS only.
Result<bool> ParseLevel(std::string_view text) {
  if (text == "OFF") return false;
  if (text == "TIMESTAMPS") return true;
  if (text == "TENSORS") return InvalidArgument("level TENSORS is not supported (OFF or TIMESTAMPS)");
  return InvalidArgument(Quoted(text) + " is not a trace level (OFF or TIMESTAMPS)");
}

// The API's list: ["OFF"], or TIMESTAMPS (given once or more).
Result<bool> ParseLevels(const std::vector<std::string>& values) {
  if (values.empty()) return InvalidArgument("needs a level (OFF or TIMESTAMPS)");
  bool timestamps = false;
  for (const std::string& value : values) {
    WEFT_ASSIGN_OR_RETURN(timestamps, ParseLevel(value));
    if (!timestamps && values.size() > 1) return InvalidArgument("OFF cannot be given with another level");
  }
  return timestamps;
}

Status CheckUrl(std::string_view url) {
  constexpr std::string_view kHttp = "http://";
  if (url.starts_with("https://")) return InvalidArgument("https is not supported yet; give an http:// url");
  const bool printable = std::all_of(url.begin(), url.end(), [](char c) { return c > 0x20 && c < 0x7F; });
  if (!url.starts_with(kHttp) || url.size() == kHttp.size() || !printable) {
    return InvalidArgument(Quoted(url) + " is not an http:// url");
  }
  return Status::Ok();
}

// Sets the attribute `key=value`, in place when the key is there already.
Status AddResource(std::string_view attribute, TraceSettings* settings) {
  const size_t eq = attribute.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return InvalidArgument(Quoted(attribute) + " is not a resource attribute key=value");
  }
  if (!IsValidUtf8(attribute)) return InvalidArgument("a resource attribute must be UTF-8, as OTLP's strings are");
  std::string key(attribute.substr(0, eq));
  std::string value(attribute.substr(eq + 1));
  auto& resource = settings->otel_resource;
  auto it = std::find_if(resource.begin(), resource.end(), [&](const auto& kv) { return kv.first == key; });
  if (it != resource.end()) {
    it->second = std::move(value);
  } else {
    resource.emplace_back(std::move(key), std::move(value));
  }
  return Status::Ok();
}

// Sets a setting from one value. A level is one level; a resource adds one attribute.
Status SetOne(Setting setting, std::string_view value, TraceSettings* s) {
  switch (setting) {
    case Setting::kMode: {
      std::optional<TraceMode> mode = ParseMode(value);
      if (!mode) return InvalidArgument(Quoted(value) + " is not a trace mode (triton or opentelemetry)");
      s->mode = *mode;
      return Status::Ok();
    }
    case Setting::kLevel: {
      WEFT_ASSIGN_OR_RETURN(s->timestamps, ParseLevel(value));
      return Status::Ok();
    }
    case Setting::kRate: {
      WEFT_ASSIGN_OR_RETURN(s->rate, ParseBounded(value, 0, kMaxTraceRate));
      return Status::Ok();
    }
    case Setting::kCount: {
      WEFT_ASSIGN_OR_RETURN(int64_t count, ParseInteger<int64_t>(value));
      if (count < -1) return InvalidArgument(Quoted(value) + " is below -1 (no limit)");
      s->count = count;
      return Status::Ok();
    }
    case Setting::kParentBased: {
      WEFT_ASSIGN_OR_RETURN(s->parent_based, ParseBool(value));
      return Status::Ok();
    }
    case Setting::kFile: s->file = std::string(value); return Status::Ok();
    case Setting::kLogFrequency: {
      WEFT_ASSIGN_OR_RETURN(s->log_frequency, ParseInteger<uint64_t>(value));
      return Status::Ok();
    }
    case Setting::kUrl: {
      WEFT_RETURN_IF_ERROR(CheckUrl(value));
      s->otel_url = std::string(value);
      return Status::Ok();
    }
    case Setting::kResource: return AddResource(value, s);
    case Setting::kBspMaxQueueSize: {
      WEFT_ASSIGN_OR_RETURN(s->bsp_max_queue_size, ParseBounded(value, 1, kMaxBspQueueSize));
      return Status::Ok();
    }
    case Setting::kBspMaxExportBatchSize: {
      // Its upper bound is the queue's size, checked once every setting is in (CheckBatchFitsQueue).
      WEFT_ASSIGN_OR_RETURN(s->bsp_max_export_batch_size, ParseBounded(value, 1, kMaxBspQueueSize));
      return Status::Ok();
    }
    case Setting::kBspScheduleDelay: {
      WEFT_ASSIGN_OR_RETURN(uint64_t ms, ParseBounded(value, 1, static_cast<uint64_t>(kMaxBspScheduleDelay.count())));
      s->bsp_schedule_delay = std::chrono::milliseconds(static_cast<int64_t>(ms));
      return Status::Ok();
    }
  }
  return Internal("unhandled trace setting");
}

// Sets a setting from the API's values. A list replaces the whole level or resource; a scalar takes one value.
Status SetFromApi(Setting setting, const std::vector<std::string>& values, TraceSettings* s) {
  if (setting == Setting::kLevel) {
    WEFT_ASSIGN_OR_RETURN(s->timestamps, ParseLevels(values));
    return Status::Ok();
  }
  if (setting == Setting::kResource) {
    s->otel_resource.clear();
    for (const std::string& attribute : values) WEFT_RETURN_IF_ERROR(AddResource(attribute, s));
    return Status::Ok();
  }
  if (values.size() != 1) return InvalidArgument("takes exactly one value, not " + std::to_string(values.size()));
  return SetOne(setting, values[0], s);
}

// The one check across settings, made after all of them are in, so that their order does not matter.
Status CheckBatchFitsQueue(const TraceSettings& s, bool api_names) {
  if (s.bsp_max_export_batch_size <= s.bsp_max_queue_size) return Status::Ok();
  auto name = [api_names](Setting setting) {
    return std::string(api_names ? NameOf(setting).api : NameOf(setting).flag);
  };
  return InvalidArgument(name(Setting::kBspMaxExportBatchSize) + " (" + std::to_string(s.bsp_max_export_batch_size) +
                         ") must not exceed " + name(Setting::kBspMaxQueueSize) + " (" +
                         std::to_string(s.bsp_max_queue_size) + ")");
}

Status ApplyFlag(std::string_view flag, TraceSettings* settings) {
  const size_t eq = flag.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgument("expected <setting>=<value> or <mode>,<setting>=<value>");
  }
  std::string_view name = flag.substr(0, eq);
  const std::string_view value = flag.substr(eq + 1);
  std::optional<TraceMode> prefix;
  if (const size_t comma = name.find(','); comma != std::string_view::npos) {
    prefix = ParseMode(name.substr(0, comma));
    if (!prefix) return InvalidArgument("unknown trace mode " + Quoted(name.substr(0, comma)));
    name.remove_prefix(comma + 1);
  }
  const SettingName* setting = ByFlagName(name);
  if (setting == nullptr) return InvalidArgument("unknown trace setting " + Quoted(name));
  if (prefix && setting->mode != prefix) {
    return InvalidArgument(setting->mode
                               ? Quoted(name) + " is a setting of mode " + std::string(ModeName(*setting->mode))
                               : Quoted(name) + " belongs to every mode; give it without one");
  }
  return SetOne(setting->setting, value, settings);
}

bool IsModelSetting(Setting setting) {
  return setting == Setting::kLevel || setting == Setting::kRate || setting == Setting::kCount;
}

}  // namespace

Result<TraceSettings> ParseTraceConfig(const std::vector<std::string>& flags, TraceSettings base) {
  for (const std::string& flag : flags) {
    WEFT_RETURN_IF_ERROR(ApplyFlag(flag, &base).WithContext("--trace-config " + Quoted(flag)));
  }
  WEFT_RETURN_IF_ERROR(CheckBatchFitsQueue(base, /*api_names=*/false).WithContext("--trace-config"));
  return base;
}

Result<TraceSettings> ApplyTraceSettingUpdate(const TraceSettings& current, const TraceSettingUpdate& update) {
  TraceSettings next = current;
  for (const auto& [name, values] : update) {
    const SettingName* setting = ByApiName(name);
    if (setting == nullptr) return InvalidArgument("unknown trace setting " + Quoted(name));
    const std::string context = "trace setting " + Quoted(name);
    if (!values) return InvalidArgument(context + ": a server-wide setting cannot be cleared; give a value");
    // As Triton (and weft's log_file): a client that could name the file could make the server write
    // anywhere it may. The current value is accepted, so that what GET answers can be posted back.
    if (setting->setting == Setting::kFile && !(values->size() == 1 && (*values)[0] == current.file)) {
      return InvalidArgument(context +
                             ": the trace file cannot be changed over the network; set it with --trace-config "
                             "triton,file=PATH");
    }
    WEFT_RETURN_IF_ERROR(SetFromApi(setting->setting, *values, &next).WithContext(context));
  }
  WEFT_RETURN_IF_ERROR(CheckBatchFitsQueue(next, /*api_names=*/true));
  return next;
}

Result<ModelTraceSettings> ApplyModelTraceSettingUpdate(const ModelTraceSettings& current,
                                                        const TraceSettingUpdate& update) {
  ModelTraceSettings next = current;
  for (const auto& [name, values] : update) {
    const SettingName* setting = ByApiName(name);
    if (setting == nullptr) return InvalidArgument("unknown trace setting " + Quoted(name));
    if (!IsModelSetting(setting->setting)) {
      return InvalidArgument("trace setting " + Quoted(name) +
                             " is server-wide: it cannot be set for one model (only trace_level, trace_rate and "
                             "trace_count can)");
    }
    const Setting which = setting->setting;
    if (!values) {
      if (which == Setting::kLevel) next.timestamps.reset();
      if (which == Setting::kRate) next.rate.reset();
      if (which == Setting::kCount) next.count.reset();
      continue;
    }
    // Parsed by the server-wide rules into a scratch copy, so that both accept the same values.
    TraceSettings scratch;
    WEFT_RETURN_IF_ERROR(SetFromApi(which, *values, &scratch).WithContext("trace setting " + Quoted(name)));
    if (which == Setting::kLevel) next.timestamps = scratch.timestamps;
    if (which == Setting::kRate) next.rate = scratch.rate;
    if (which == Setting::kCount) next.count = scratch.count;
  }
  return next;
}

std::map<std::string, std::vector<std::string>> TraceSettingsView(const TraceSettings& server,
                                                                  const ModelTraceSettings* model) {
  const bool timestamps = model && model->timestamps ? *model->timestamps : server.timestamps;
  const uint64_t rate = model && model->rate ? *model->rate : server.rate;
  const int64_t count = model && model->count ? *model->count : server.count;
  std::vector<std::string> resource;
  resource.reserve(server.otel_resource.size());
  for (const auto& [key, value] : server.otel_resource) resource.push_back(key + "=" + value);
  auto name = [](Setting setting) { return std::string(NameOf(setting).api); };
  return {
      {name(Setting::kMode), {std::string(ModeName(server.mode))}},
      {name(Setting::kLevel), {timestamps ? "TIMESTAMPS" : "OFF"}},
      {name(Setting::kRate), {std::to_string(rate)}},
      {name(Setting::kCount), {std::to_string(count)}},
      {name(Setting::kParentBased), {server.parent_based ? "true" : "false"}},
      {name(Setting::kFile), {server.file}},
      {name(Setting::kLogFrequency), {std::to_string(server.log_frequency)}},
      {name(Setting::kUrl), {server.otel_url}},
      {name(Setting::kResource), std::move(resource)},
      {name(Setting::kBspMaxQueueSize), {std::to_string(server.bsp_max_queue_size)}},
      {name(Setting::kBspMaxExportBatchSize), {std::to_string(server.bsp_max_export_batch_size)}},
      {name(Setting::kBspScheduleDelay), {std::to_string(server.bsp_schedule_delay.count())}},
  };
}

}  // namespace weft
