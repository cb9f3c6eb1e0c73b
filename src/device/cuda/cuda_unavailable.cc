// The CUDA device in a build without the CUDA toolkit: every entry point says so.
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_ipc.h"

namespace weft {

namespace {
constexpr char kReason[] = "this weft was built without CUDA (no CUDA toolkit was found at configure time)";
}

std::string CudaUnavailableReason() { return kReason; }

Result<std::unique_ptr<Device>> CreateCudaDevice(CudaDeviceOptions) { return Unavailable(kReason); }

Status LaunchSpinKernel(const NativeStream&, std::chrono::nanoseconds, int, int) { return Unavailable(kReason); }

Result<std::shared_ptr<CudaSharedBuffer>> OpenCudaIpcBuffer(int, std::span<const std::byte> handle) {
  if (handle.size() != kCudaIpcHandleBytes) {
    return InvalidArgument("a CUDA IPC handle has " + std::to_string(kCudaIpcHandleBytes) + " bytes, not " +
                           std::to_string(handle.size()));
  }
  return Unimplemented(std::string("CUDA shared memory needs a GPU: ") + kReason);
}

Result<std::shared_ptr<CudaSharedBuffer>> ExportCudaBuffer(int, uint64_t) {
  return Unimplemented(std::string("CUDA shared memory needs a GPU: ") + kReason);
}

}  // namespace weft
