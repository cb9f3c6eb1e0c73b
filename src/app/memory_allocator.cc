#include "app/memory_allocator.h"

#include <string>

#ifdef WEFT_JEMALLOC
#include <jemalloc/jemalloc.h>

// jemalloc reads its options from this symbol when it starts; MALLOC_CONF in the environment still overrides them.
// oversize_threshold:0 turns off the separate arena for allocations of 8 MiB and more. That arena gives freed
// pages back to the system at once, so each large request body (a 16 MB tensor) was faulted in again, page by
// page, on the next request. On this project's VMs a fault costs tens of microseconds, and a 16 MB round trip over
// HTTP took 55-105 ms instead of 9-12 (docs/benchmarks.md). In the ordinary arenas freed pages wait for the decay
// time (10 s) and are reused. background_thread: one thread of jemalloc's purges them once that time is up, so a
// burst's memory goes back even when no allocation follows (without it, 256 MiB stayed resident after 16 requests
// of 16 MB). Buffers of 64 MiB and more (MapLargeBuffer) are mapped on their own either way.
const char* malloc_conf = "oversize_threshold:0,background_thread:true,max_background_threads:1";
#endif

namespace weft {

std::string MemoryAllocatorName() {
#ifdef WEFT_JEMALLOC
  std::string name = "jemalloc";
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) name += std::string(" ") + version;
  // The options in force, which MALLOC_CONF may have changed.
  size_t oversize = 0;
  size = sizeof(oversize);
  if (mallctl("opt.oversize_threshold", &oversize, &size, nullptr, 0) == 0) {
    name += oversize == 0 ? " (no oversize arena" : " (oversize arena from " + std::to_string(oversize) + " bytes";
    bool background = false;
    size = sizeof(background);
    if (mallctl("background_thread", &background, &size, nullptr, 0) == 0) {
      name += background ? ", background purge" : ", purge on allocation";
    }
    name += ")";
  }
  return name;
#else
  return "the C library's malloc";
#endif
}

}  // namespace weft
