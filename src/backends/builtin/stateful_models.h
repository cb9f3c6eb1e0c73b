#pragma once

#include <memory>

#include "base/result.h"
#include "model/backend.h"

namespace weft {

// Builtin models beyond the stateless ones in builtin_backend.cc.
//
// counter   one input of any type, one output of type INT64 and dims [1]: for each batch item, the instance's
//           running count of items executed before it (0, 1, 2, ...). Its output depends on execution order, so
//           it shows whether order per instance survives a move between streams. Parameter batch_delay_us
//           (default 0) sleeps first.
// gpu_spin  identity (outputs = inputs) after a CUDA kernel of parameter `blocks` blocks (default 1) of
//           `threads_per_block` threads (default 32) has spun for spin_us + item_spin_us * batch size
//           microseconds (defaults 1000 and 0) on the instance's stream. Stands in for any model in GPU
//           experiments. Needs a build with CUDA and a GPU (CreateInstance says why not), and a CUDA stream
//           (Execute fails on the CPU device).

Status ValidateCounter(const ModelConfig& config);
Result<std::unique_ptr<ModelInstance>> MakeCounterInstance(const ModelConfig& config);

Status ValidateGpuSpin(const ModelConfig& config);
Result<std::unique_ptr<ModelInstance>> MakeGpuSpinInstance(const ModelConfig& config);

}  // namespace weft
