#include "backends/backends.h"

#include "backends/builtin/builtin_backend.h"

// The only place that knows which optional backends were built; CMake sets both macros to 0 or 1.
#if WEFT_HAVE_TORCHSCRIPT_BACKEND
#include "backends/torchscript/torchscript_backend.h"
#endif
#if WEFT_HAVE_ONNX_BACKEND
#include "backends/onnx/onnx_backend.h"
#endif

namespace weft {

void RegisterAvailableBackends(BackendRegistry* registry) {
  registry->Register("weft_builtin", {}, MakeBuiltinBackend());
#if WEFT_HAVE_TORCHSCRIPT_BACKEND
  registry->Register("pytorch", {"pytorch_libtorch"}, MakeTorchScriptBackend());
#endif
#if WEFT_HAVE_ONNX_BACKEND
  registry->Register("onnxruntime", {"onnxruntime_onnx"}, MakeOnnxBackend());
#endif
}

}  // namespace weft
