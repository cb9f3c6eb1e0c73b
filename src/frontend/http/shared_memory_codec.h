#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "frontend/shm/shared_memory.h"

namespace weft {

// The JSON of the system shared memory routes. Pure functions. Thread-safe.

// The body of POST v2/systemsharedmemory/region/{r}/register.
struct SharedMemoryRegistration {
  std::string key;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

// Decodes `{"key": string, "offset": integer (default 0), "byte_size": integer}`. InvalidArgument when the JSON is
// malformed or a field is missing or mistyped.
Result<SharedMemoryRegistration> DecodeSharedMemoryRegistration(std::span<const std::byte> body);

// `[{"name", "key", "offset", "byte_size"}, ...]`, as GET v2/systemsharedmemory[/region/{r}]/status answers.
std::string EncodeSharedMemoryStatus(const std::vector<SharedMemoryRegionStatus>& regions);

}  // namespace weft
