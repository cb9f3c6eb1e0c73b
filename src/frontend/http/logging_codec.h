#pragma once

#include <span>
#include <string>

#include "base/log.h"
#include "base/result.h"

namespace weft {

// Triton's logging extension over HTTP: GET /v2/logging answers the settings; POST /v2/logging takes a JSON object
// of settings by name (base/log.h: ApplyLogSetting) and answers the settings that result.

// The body of POST /v2/logging applied to `current`: every setting or none. InvalidArgument for malformed JSON, a
// body that is not an object, and each refusal of ApplyLogSetting. An empty body changes nothing.
Result<LogSettings> DecodeLogSettingsUpdate(std::span<const std::byte> body, LogSettings current);

// {"log_file":"","log_info":true,"log_warning":true,"log_error":true,"log_verbose_level":0,"log_format":"default"}
std::string EncodeLogSettings(const LogSettings& settings);

}  // namespace weft
