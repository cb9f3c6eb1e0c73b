#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "base/status.h"

namespace weft {

// How the TorchScript backend turns libtorch's exceptions into a Status. Internal to the backend; pure functions.

// Where in an execution libtorch threw: decides what an error other than out of memory means.
enum class TorchStage {
  kForward,  // inside the model's forward(): the inputs matched the config, so the model rejected them
  kOther,    // around it (copies to and from the device, the outputs): a runtime fault
};

// In the message of the large-buffer allocator's failure (torch_allocator.h), so that it is still recognized after
// the TorchScript interpreter has turned it into text.
inline constexpr std::string_view kWeftTorchOutOfMemory = "weft: out of memory";

// Whether `e`, thrown by libtorch, reports a failed allocation of device or host memory: a c10::OutOfMemoryError
// (CUDA's caching allocator, torch 2's CPU allocator), a std::bad_alloc, or an error whose message says so. The
// message counts because the TorchScript interpreter rethrows whatever went wrong inside forward() as a
// std::runtime_error that keeps only the text, and torch 1's CPU allocator throws a plain c10::Error.
bool IsTorchOutOfMemory(const std::exception& e);

// The Status for `e`, thrown by libtorch while model `model` executed at `stage`: OutOfMemory "model '<model>' ran
// out of memory: ..." for a failed allocation; otherwise InvalidArgument "model '<model>' rejected its inputs: ..."
// inside forward(), Internal elsewhere. The message leaves out torch's C++ backtrace and the TorchScript traceback (the
// model's source and the exporting machine's paths): clients get the error's last line.
Status TorchExecutionError(const std::exception& e, const std::string& model, TorchStage stage);

}  // namespace weft
