#pragma once

// CUDA runtime errors as Status values, for the .cc files of this target only (it includes a CUDA header, so no
// public header may include it).

#include <cuda_runtime.h>

#include <string>

#include "base/result.h"

namespace weft {

inline Status CudaError(cudaError_t error, const std::string& what) {
  return Internal(what + ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

#define WEFT_CUDA_RETURN_IF_ERROR(expr, what)     \
  do {                                            \
    cudaError_t weft_cuda_error_ = (expr);        \
    if (weft_cuda_error_ != cudaSuccess) {        \
      return CudaError(weft_cuda_error_, (what)); \
    }                                             \
  } while (0)

}  // namespace weft
