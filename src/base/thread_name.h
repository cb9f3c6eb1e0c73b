#pragma once

#include <string>
#include <string_view>

namespace weft {

// Names the calling thread for `top -H`, `perf` and debuggers ("http-io", "i:convnet"). Linux keeps at most 15
// bytes: a longer name is cut there, never at a byte inside a UTF-8 character. Best effort.
void SetCurrentThreadName(std::string_view name);

// The calling thread's name, as the kernel keeps it.
std::string CurrentThreadName();

}  // namespace weft
