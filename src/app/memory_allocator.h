#pragma once

#include <memory>
#include <string>

namespace weft {

// The malloc this binary runs on, for the start-up log: "jemalloc 5.3.0-0-g54eaed1d8b56" or "the C library's
// malloc" (a sanitized build, or one without libjemalloc-dev).
std::string MemoryAllocatorName();

// Gives jemalloc's freed pages back to the system once large allocations have stopped for a while
// (IdlePurgePolicy); one thread, "mem-purge", that looks once a second. Nothing with the C library's malloc, or when
// MALLOC_CONF turned jemalloc's own decay back on. Stops when destroyed.
class IdleMemoryPurge {
 public:
  static std::unique_ptr<IdleMemoryPurge> Start();
  virtual ~IdleMemoryPurge() = default;
};

}  // namespace weft
