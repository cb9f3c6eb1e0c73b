#include "app/memory_allocator.h"

#ifdef WEFT_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace weft {

std::string MemoryAllocatorName() {
#ifdef WEFT_JEMALLOC
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (mallctl("version", &version, &size, nullptr, 0) == 0 && version != nullptr) {
    return std::string("jemalloc ") + version;
  }
  return "jemalloc";
#else
  return "the C library's malloc";
#endif
}

}  // namespace weft
