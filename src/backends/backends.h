#pragma once

#include "model/backend.h"

namespace weft {

// Registers every backend compiled into this build: "weft_builtin" always; "pytorch" (platform
// "pytorch_libtorch") when built with libtorch; "onnxruntime" (platform "onnxruntime_onnx", run on OpenCV DNN)
// when built with OpenCV. Call once at start-up, before the registry is shared and before any model runs: it also
// corrects OpenBLAS's choice of kernels where OpenBLAS did not know the CPU (common/openblas_core.h).
void RegisterAvailableBackends(BackendRegistry* registry);

}  // namespace weft
