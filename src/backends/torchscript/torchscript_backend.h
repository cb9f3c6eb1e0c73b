#pragma once

#include <memory>

#include "model/backend.h"

namespace weft {

// Runs TorchScript models (libtorch) on the CPU. Selected by `platform: "pytorch_libtorch"` or
// `backend: "pytorch"`; the file is `model.pt` unless `default_model_filename` names another.
//
// - Each instance loads its own copy of the module, so instances never share interpreter state.
// - Inputs reach forward() in config order, wrapped without a copy; outputs are the tensors forward returns
//   (one Tensor, or a tuple/list of them, mapped to the config's outputs in order), made contiguous and handed
//   out without a copy: each weft Tensor owns its torch::Tensor.
// - Datatypes: BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, BF16, FP32, FP64. Not BYTES, not UINT16/32/64.
// - Parameter `intra_op_threads` (default 1) is applied with at::set_num_threads when an instance is created.
//   torch keeps that number per process, not per model: the last instance created sets it for every
//   TorchScript model in the process, so give all of them the same value. Every thread that executes applies it
//   before its first execution (OpenMP keeps the count per thread).
// - Parameter `weft.optimize_for_inference` ("on" or "off"): a CPU instance's module goes through
//   torch::jit::optimize_for_inference. By default it does, and a module the pass cannot take serves as loaded.
//
// Thread-safe; each instance is used by one thread at a time (the ModelInstance contract).
std::shared_ptr<const Backend> MakeTorchScriptBackend();

}  // namespace weft
