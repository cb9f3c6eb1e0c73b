#include "model/parameter_text.h"

#include <array>
#include <charconv>
#include <system_error>

#include "base/json_string.h"

namespace weft {

std::string_view TrimParameter(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(kSpace) - begin + 1);
}

std::string QuotedParameter(std::string_view value) {
  return "'" + TruncateUtf8(value, kMaxQuotedParameterBytes) + "'";
}

Status BadParameter(std::string_view key, std::string_view expected, std::string_view got) {
  return InvalidArgument("parameters '" + std::string(key) + "': expected " + std::string(expected) + ", got " +
                         std::string(got));
}

Result<bool> ParseParameterSwitch(std::string_view key, std::string_view value) {
  const std::string_view trimmed = TrimParameter(value);
  if (trimmed == "on") return true;
  if (trimmed == "off") return false;
  return BadParameter(key, "\"on\" or \"off\"", QuotedParameter(value));
}

std::string FormatParameterDouble(double value) {
  std::array<char, 64> buffer;
  auto [end, ec] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return ec == std::errc() ? std::string(buffer.data(), end) : std::string("?");
}

std::optional<uint64_t> ParseParameterUnsigned(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> ParseParameterDouble(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace weft
