// The CUDA device in a build without the CUDA toolkit: every entry point says so.
#include "device/cuda/cuda_device.h"

namespace weft {

namespace {
constexpr char kReason[] = "this weft was built without CUDA (no CUDA toolkit was found at configure time)";
}

std::string CudaUnavailableReason() { return kReason; }

Result<std::unique_ptr<Device>> CreateCudaDevice(CudaDeviceOptions) { return Unavailable(kReason); }

Status LaunchSpinKernel(const NativeStream&, std::chrono::nanoseconds, int, int) { return Unavailable(kReason); }

}  // namespace weft
