#pragma once

#include <memory>

#include "model/backend.h"

namespace weft {

// Runs ONNX models on OpenCV DNN (CPU). Selected by `platform: "onnxruntime_onnx"` or `backend: "onnxruntime"`,
// so that Triton repositories load as they are; the file is `model.onnx` unless `default_model_filename` names
// another.
//
// - OpenCV DNN computes in FP32, so every input and output must be FP32 (Validate says so otherwise).
// - Each instance reads its own cv::dnn::Net: a Net keeps per-run state and is not thread-safe.
// - Inputs are handed to OpenCV without a copy on our side (setInput copies them into the Net); outputs are
//   copied out, because the Net reuses its output buffers on the next forward().
// - Outputs are looked up by layer name, which for ONNX is the name of the node's first output; a secondary
//   output of a multi-output node cannot be named. 1-D tensors become N x 1 matrices in OpenCV 4.6.
// - OpenCV's thread pool is process-wide and sized by OpenCV (cv::setNumThreads), not per model.
//
// Thread-safe; each instance is used by one thread at a time (the ModelInstance contract).
std::shared_ptr<const Backend> MakeOnnxBackend();

}  // namespace weft
