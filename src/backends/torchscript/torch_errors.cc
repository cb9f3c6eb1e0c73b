#include "backends/torchscript/torch_errors.h"

#include <c10/util/Exception.h>

#include <array>
#include <new>

namespace weft {
namespace {

// What torch's allocators say when they give up, as it survives in the text of a rethrown error.
constexpr std::array<std::string_view, 5> kOutOfMemoryMarkers = {
    "CUDA out of memory",                          // c10's CUDA caching allocator
    "DefaultCPUAllocator: can't allocate memory",  // torch 1's CPU allocator
    "DefaultCPUAllocator: not enough memory",      // torch 2's
    "std::bad_alloc",                              // a std::bad_alloc, as the interpreter prints it
    kWeftTorchOutOfMemory,                         // weft's large-buffer allocator
};

// torch messages carry a C++ backtrace that is noise to a client; what_without_backtrace() drops it.
std::string MessageOf(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) return error->what_without_backtrace();
  return e.what();
}

// An error inside forward() comes with the TorchScript traceback: the model's source and the paths of the machine
// that exported it, then the error itself on the last line. Clients get that last line.
std::string LastLineOfTraceback(const std::string& message) {
  if (message.find("TorchScript interpreter") == std::string::npos) return message;
  size_t end = message.find_last_not_of("\n ");
  if (end == std::string::npos) return message;
  size_t newline = message.rfind('\n', end);
  size_t begin = newline == std::string::npos ? 0 : newline + 1;
  return message.substr(begin, end + 1 - begin);
}

}  // namespace

bool IsTorchOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const std::string message = MessageOf(e);
  for (std::string_view marker : kOutOfMemoryMarkers) {
    if (message.find(marker) != std::string::npos) return true;
  }
  return false;
}

Status TorchExecutionError(const std::exception& e, const std::string& model, TorchStage stage) {
  const std::string message = LastLineOfTraceback(MessageOf(e));
  if (IsTorchOutOfMemory(e)) return OutOfMemory("model '" + model + "' ran out of memory: " + message);
  if (stage == TorchStage::kForward) return InvalidArgument("model '" + model + "' rejected its inputs: " + message);
  return Internal("model '" + model + "': " + message);
}

}  // namespace weft
