#include "backends/backends.h"

#include "backends/builtin/builtin_backend.h"
#include "backends/common/openblas_core.h"
#include "base/log.h"

// The only place that knows which optional backends were built; CMake sets both macros to 0 or 1.
#if WEFT_HAVE_TORCHSCRIPT_BACKEND
#include "backends/torchscript/torchscript_backend.h"
#endif
#if WEFT_HAVE_ONNX_BACKEND
#include "backends/onnx/onnx_backend.h"
#endif

namespace weft {

void RegisterAvailableBackends(BackendRegistry* registry) {
  // Here, so that the server and every bench that registers backends run the same kernels, chosen before any
  // model runs.
  if (std::optional<OpenBlasCoreChange> change = FixOpenBlasCoreForThisCpu()) {
    WEFT_LOG(Info) << "OpenBLAS chose its " << change->from << " kernels (SSE3) on a CPU with AVX, whose model it "
                   << "does not know; running its " << change->to << " kernels instead (set OPENBLAS_CORETYPE to "
                   << "choose)";
  }
  registry->Register("weft_builtin", {}, MakeBuiltinBackend());
#if WEFT_HAVE_TORCHSCRIPT_BACKEND
  registry->Register("pytorch", {"pytorch_libtorch"}, MakeTorchScriptBackend());
#endif
#if WEFT_HAVE_ONNX_BACKEND
  registry->Register("onnxruntime", {"onnxruntime_onnx"}, MakeOnnxBackend());
#endif
}

}  // namespace weft
