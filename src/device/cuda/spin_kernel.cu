// The one CUDA C++ file: the spin kernel and its launch. Kept free of weft headers so that nvcc compiles nothing
// else; cuda_device.cc wraps it in a Status.
#include <cuda_runtime.h>

namespace weft::cuda_kernels {
namespace {

__device__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Each block spins until `ns` nanoseconds of the GPU's global timer have passed since it started.
__global__ void Spin(unsigned long long ns) {
  const unsigned long long start = GlobalTimerNs();
  while (GlobalTimerNs() - start < ns) {
  }
}

}  // namespace

cudaError_t LaunchSpin(cudaStream_t stream, unsigned long long ns, int blocks, int threads) {
  Spin<<<blocks, threads, 0, stream>>>(ns);
  return cudaGetLastError();
}

}  // namespace weft::cuda_kernels
