#include "base/large_buffer.h"

#include <sys/mman.h>

#include <algorithm>

namespace weft {
namespace {

// Each slice holds the memory map for well under a millisecond.
constexpr size_t kReleaseSliceBytes = size_t{16} << 20;

}  // namespace

void* MapLargeBuffer(size_t size) {
  void* data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return data == MAP_FAILED ? nullptr : data;
}

void UnmapLargeBuffer(void* data, size_t size) {
  if (data == nullptr) return;
  auto* bytes = static_cast<std::byte*>(data);
  for (size_t offset = 0; offset < size; offset += kReleaseSliceBytes) {
    madvise(bytes + offset, std::min(kReleaseSliceBytes, size - offset), MADV_DONTNEED);
  }
  munmap(data, size);
}

}  // namespace weft
