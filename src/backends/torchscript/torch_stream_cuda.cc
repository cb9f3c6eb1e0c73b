// A libtorch with CUDA: the multiplexer's stream becomes torch's current stream for the execution.
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include "backends/torchscript/torch_stream.h"

namespace weft {
namespace {

class CudaStreamScope final : public TorchStreamScope {
 public:
  explicit CudaStreamScope(c10::cuda::CUDAStream stream) : guard_(stream) {}

 private:
  c10::cuda::CUDAStreamGuard guard_;  // also sets the current device to the stream's
};

}  // namespace

bool TorchCudaAvailable() { return torch::cuda::is_available(); }

std::unique_ptr<TorchStreamScope> EnterTorchStream(const ExecutionStream& stream) {
  if (stream.kind != MemoryKind::kGpu || stream.native == nullptr) return nullptr;
  auto external = c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(stream.native),
                                                   static_cast<c10::DeviceIndex>(stream.device_id));
  return std::make_unique<CudaStreamScope>(external);
}

void ReleaseTorchCudaCache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

}  // namespace weft
