#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"

namespace weft {

// Reading weft's settings from a config's `parameters` (string values, as Triton's config gives them): what the
// parsers of weft.breaker.*, weft.rollout.* and their kin share. A config may come from a client (the repository
// API's load override), so messages quote at most kMaxQuotedParameterBytes of a value. Pure.

inline constexpr size_t kMaxQuotedParameterBytes = 64;

// `s` without leading and trailing whitespace.
std::string_view TrimParameter(std::string_view s);
// 'value', cut to kMaxQuotedParameterBytes (on a UTF-8 boundary).
std::string QuotedParameter(std::string_view value);
// InvalidArgument: "parameters 'KEY': expected EXPECTED, got GOT".
Status BadParameter(std::string_view key, std::string_view expected, std::string_view got);
// "on" or "off" (whitespace around it allowed) as true or false; BadParameter naming `key` for anything else.
Result<bool> ParseParameterSwitch(std::string_view key, std::string_view value);
// The shortest text that reads back as `value` ("0.5", "1e-09", "nan").
std::string FormatParameterDouble(double value);
// The whole of `text` as a decimal integer without a sign; nullopt for anything else or on overflow.
std::optional<uint64_t> ParseParameterUnsigned(std::string_view text);
// The whole of `text` as a number (from_chars also reads "nan" and "inf": the caller checks the range).
std::optional<double> ParseParameterDouble(std::string_view text);

}  // namespace weft
