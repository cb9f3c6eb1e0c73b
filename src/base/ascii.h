#pragma once

#include <string_view>

namespace weft {

// Case-insensitive ASCII equality for header tokens ("gzip", "100-continue"). Written here because Boost 1.81's
// beast::iequals (Debian 12) reads one byte past both strings when they differ only in case at the last
// character; the content_coding fuzz target found it with "GZIP".
constexpr bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) return false;
  }
  return true;
}

// Without the optional whitespace (OWS: spaces and horizontal tabs, RFC 9110 section 5.6.3) at either end, as
// header values and list elements are read.
constexpr std::string_view TrimOptionalWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace weft
