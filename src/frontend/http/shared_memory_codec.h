#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "frontend/shm/shared_memory.h"

namespace weft {

// The JSON of the system and CUDA shared memory routes. Pure functions. Thread-safe.

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

// The body of POST v2/cudasharedmemory/region/{r}/register.
struct CudaSharedMemoryRegistration {
  std::vector<std::byte> raw_handle;
  int64_t device_id = 0;
  uint64_t byte_size = 0;
};

// Decodes `{"raw_handle": {"b64": base64 string}, "device_id": integer, "byte_size": integer}` (standard base64
// with padding, as Triton's clients send the cudaIpcMemHandle_t). InvalidArgument when the JSON is malformed, a
// field is missing or mistyped, or the base64 is bad; the handle's length is the registry's to check.
Result<CudaSharedMemoryRegistration> DecodeCudaSharedMemoryRegistration(std::span<const std::byte> body);

// `[{"name", "device_id", "byte_size"}, ...]`, as GET v2/cudasharedmemory[/region/{r}]/status answers.
std::string EncodeCudaSharedMemoryStatus(const std::vector<CudaSharedMemoryRegionStatus>& regions);

}  // namespace weft
