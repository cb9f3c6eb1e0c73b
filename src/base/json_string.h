#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft {

// JSON string literals for every part that writes JSON by hand (the frontends, the repository's config JSON, the
// load generator, the benchmark drivers), and the UTF-8 rules they share.

// Appends `value` as a quoted JSON string: quotes, backslashes and control characters escaped, well-formed UTF-8
// as it is, and each byte that is not part of well-formed UTF-8 as U+FFFD, so that the result is always valid
// JSON whatever a client or a directory name held.
void AppendJsonString(std::string* out, std::string_view value);

// The same, as a new string.
std::string JsonString(std::string_view value);

// Whether `value` is well-formed UTF-8 (RFC 3629).
bool IsValidUtf8(std::string_view value);

// `value` cut to at most `max_bytes` on a character boundary, followed by "... (N more bytes)" when it was longer.
// For messages that quote what a client sent: an error must not carry a 100 KB name back.
std::string TruncateUtf8(std::string_view value, size_t max_bytes);

}  // namespace weft
