#pragma once

#include <string>
#include <string_view>

namespace weft {

// JSON string literals for every part that writes JSON by hand (the frontends, the repository's config JSON, the
// load generator, the benchmark drivers).

// Appends `value` as a quoted JSON string: quotes, backslashes and control characters escaped, every other byte
// (UTF-8) as it is.
void AppendJsonString(std::string* out, std::string_view value);

// The same, as a new string.
std::string JsonString(std::string_view value);

}  // namespace weft
