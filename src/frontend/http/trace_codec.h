#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "trace/trace_settings.h"

namespace weft {

// Triton's trace extension over HTTP: GET /v2/trace/setting and /v2/models/{m}/trace/setting answer the settings;
// POST to either takes a JSON object of settings by API name (trace/trace_settings.h: ApplyTraceSettingUpdate,
// ApplyModelTraceSettingUpdate) and answers the settings that result.

// The body of a POST, e.g. {"trace_rate": "10", "trace_level": ["TIMESTAMPS"], "trace_count": null}, as an update:
// a string, an integer or a boolean is one value ("10", "-1", "true"), an array of strings is a list, null clears.
// InvalidArgument for malformed JSON, a body that is not an object or is over 64 KiB, a key given twice, and any
// other value (a fraction, an object, an array holding anything but strings). An empty body is an empty update.
// Whether the names and values make sense is the Apply functions' concern. Pure.
Result<TraceSettingUpdate> ParseTraceSettingJson(std::string_view body);

// The settings as GET answers them: trace_level and opentelemetry_resource as arrays of strings, every other
// setting as a string, e.g. {"log_frequency":"0","trace_level":["TIMESTAMPS"],"trace_rate":"1000",...}.
std::string TraceSettingsJson(const std::map<std::string, std::vector<std::string>>& view);

}  // namespace weft
