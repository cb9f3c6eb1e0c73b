#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "base/json_string.h"

namespace weft {

// The number half of the load generator's hand-written JSON; strings go through base/json_string.h. The server's
// JsonWriter lives in the frontend, which a client must not link.

// Appends a number in its shortest form that reads back to the same value.
template <typename Number>
void JsonNumber(Number value, std::string* out) {
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, ec == std::errc() ? end : buffer);
}

}  // namespace weft
