#pragma once

#include <string>

namespace weft {

// The malloc this binary runs on, for the start-up log: "jemalloc 5.3.0-0-g54eaed1d8b56" or "the C library's
// malloc" (a sanitized build, or one without libjemalloc-dev).
std::string MemoryAllocatorName();

}  // namespace weft
