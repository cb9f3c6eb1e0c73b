#include "base/log.h"
#include "device/cpu/cpu_device.h"
#include "device/cuda/cuda_device.h"

namespace weft {

Result<DeviceChoice> ParseDeviceChoice(std::string_view text) {
  if (text == "auto") return DeviceChoice::kAuto;
  if (text == "cpu") return DeviceChoice::kCpu;
  if (text == "cuda") return DeviceChoice::kCuda;
  return InvalidArgument("device: expected auto, cpu or cuda, got '" + std::string(text) + "'");
}

Result<std::unique_ptr<Device>> OpenDevice(const DeviceSelection& selection) {
  if (selection.choice != DeviceChoice::kCpu) {
    std::string why = CudaUnavailableReason();
    if (why.empty()) {
      return CreateCudaDevice(
          {.device_id = selection.cuda_device, .poll_high_completions = selection.poll_high_completions});
    }
    if (selection.choice == DeviceChoice::kCuda) return Unavailable("--device cuda: " + why);
    WEFT_LOG(Info) << "no GPU (" << why << "); using the CPU device with " << selection.cpu_workers << " workers";
  }
  return CreateCpuDevice({.workers = selection.cpu_workers});
}

}  // namespace weft
