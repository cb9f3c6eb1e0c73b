#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "base/result.h"

namespace weft {

// GPU memory shared between processes with CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle): what Triton's
// CUDA shared memory extension passes as a region's raw handle. Like cuda_device.h, this header includes no CUDA
// header, and a build without the toolkit links functions that say why (cuda_unavailable.cc).

// Bytes of a cudaIpcMemHandle_t, as clients send it.
inline constexpr size_t kCudaIpcHandleBytes = 64;

// One allocation of device memory, either this process's own (exported) or another process's (imported). Reads and
// writes are synchronous copies through a stream of the buffer's own, so they never wait for the device's serving
// streams and a caller may use the host bytes as soon as the call returns. Thread-safe.
class CudaSharedBuffer {
 public:
  virtual ~CudaSharedBuffer() = default;

  virtual int device_id() const = 0;
  // Bytes from the buffer's start to the end of its allocation.
  virtual uint64_t byte_size() const = 0;
  // The buffer's cudaIpcMemHandle_t (exported buffers; imported ones return the handle they were opened from).
  virtual std::span<const std::byte, kCudaIpcHandleBytes> handle() const = 0;

  // InvalidArgument when [offset, offset + size) is not within byte_size(); Internal when CUDA fails.
  virtual Status Read(uint64_t offset, std::span<std::byte> destination) const = 0;
  virtual Status Write(uint64_t offset, std::span<const std::byte> source) = 0;
};

// Opens another process's allocation on device `device_id` (closed with the last reference). InvalidArgument for a
// handle of the wrong size or a device that does not exist, or when CUDA refuses the handle (one this process
// exported, or a stale one); Unimplemented with CudaUnavailableReason() where there is no GPU.
Result<std::shared_ptr<CudaSharedBuffer>> OpenCudaIpcBuffer(int device_id, std::span<const std::byte> handle);

// Allocates `byte_size` bytes (zeroed) on device `device_id` to share with another process through handle() (freed
// with the last reference). For clients: `weft bench --shared-memory cuda` and the tests.
Result<std::shared_ptr<CudaSharedBuffer>> ExportCudaBuffer(int device_id, uint64_t byte_size);

}  // namespace weft
