#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace weft {

// The few JSON writers the load generator needs. The server's JsonWriter lives in the frontend, which a client
// must not link. The caller keeps the text well formed.

// Appends `value` quoted, escaping quotes, backslashes and control characters; other bytes pass through.
inline void JsonQuote(std::string_view value, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char c : value) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (u < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[u >> 4]);
      out->push_back(kHex[u & 0xf]);
    } else {
      out->push_back(c);
    }
  }
  out->push_back('"');
}

// Appends a number in its shortest form that reads back to the same value.
template <typename Number>
void JsonNumber(Number value, std::string* out) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, ec == std::errc() ? end : buffer);
}

}  // namespace weft
