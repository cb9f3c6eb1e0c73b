#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "base/result.h"
#include "device/device.h"

namespace weft {

// The CUDA device. This header includes no CUDA header: everything above the device layer builds without the
// toolkit, and a build without it links a stand-in whose functions say why (cuda_unavailable.cc).
//
// - Streams: non-blocking, from cudaStreamCreateWithPriority over the range cudaDeviceGetStreamPriorityRange
//   reports (logged at start-up). Work::run runs on the enqueueing thread and launches into the stream.
// - Events: cudaEventRecord / cudaStreamWaitEvent, timing disabled.
// - Completions: each piece of work is bracketed by two timing events; a side stream of the stream waits on the
//   closing one and runs cudaLaunchHostFunc, whose function only writes the stream's eventfd (a host function
//   blocks later work in its own stream, and must not call CUDA). The completion loop reads the event times.
// - Memory: pinned host buffers from a pool (cudaHostAlloc), device memory stream-ordered from the device's
//   memory pool (cudaMallocAsync / cudaFreeAsync). Never managed memory.
struct CudaDeviceOptions {
  int device_id = 0;
  size_t max_cached_pinned_bytes = size_t{1} << 30;
  // How kHigh streams learn that work has ended. False: the host function on the side stream, like every other
  // stream (no thread of ours). True: a thread of the device polls the end events with cudaEventQuery while a
  // kHigh stream has work pending, and sleeps otherwise: less latency, at the price of a core spinning while the
  // urgent class is busy. Either way the completion reaches the loop through the stream's eventfd.
  // bench/gpu/completion_bench.cc measures the two.
  bool poll_high_completions = false;
};

// Empty when CUDA is built in and a GPU is present; otherwise why not ("built without CUDA", "no CUDA driver: ...",
// "no GPU").
std::string CudaUnavailableReason();
// Unavailable with the reason when there is no GPU; Internal when the runtime fails.
Result<std::unique_ptr<Device>> CreateCudaDevice(CudaDeviceOptions options);

// Runs a kernel of `blocks` blocks of `threads_per_block` threads that each spin for `duration` on the GPU's
// global timer, on `stream` (a cudaStream_t of device `device_id`). Stands in for any model in experiments.
Status LaunchSpinKernel(const NativeStream& stream, std::chrono::nanoseconds duration, int blocks,
                        int threads_per_block = 32);

// Which device `weft serve` and the benchmark drivers run on.
enum class DeviceChoice { kAuto, kCpu, kCuda };
// "auto", "cpu" or "cuda"; InvalidArgument otherwise.
Result<DeviceChoice> ParseDeviceChoice(std::string_view text);

struct DeviceSelection {
  DeviceChoice choice = DeviceChoice::kAuto;
  int cpu_workers = 2;  // for the CPU device
  int cuda_device = 0;
  bool poll_high_completions = false;  // CudaDeviceOptions::poll_high_completions
};

// kAuto: the CUDA device when a GPU is found, otherwise the CPU device, with a log line that says why. kCuda
// without a GPU is an error (Unavailable).
Result<std::unique_ptr<Device>> OpenDevice(const DeviceSelection& selection);

}  // namespace weft
