#include "backends/onnx/opencv_errors.h"

#include <new>
#include <opencv2/core.hpp>

namespace weft {
namespace {

// e.msg repeats OpenCV's version, source file and function around the description in e.err.
std::string MessageOf(const std::exception& e) {
  if (const auto* error = dynamic_cast<const cv::Exception*>(&e)) return error->err.empty() ? error->msg : error->err;
  return e.what();
}

}  // namespace

bool IsOpenCvOutOfMemory(const std::exception& e) {
  if (const auto* error = dynamic_cast<const cv::Exception*>(&e)) return error->code == cv::Error::StsNoMem;
  return dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
}

Status OpenCvExecutionError(const std::exception& e, const std::string& model, OpenCvStage stage) {
  const std::string message = MessageOf(e);
  if (IsOpenCvOutOfMemory(e)) return OutOfMemory("model '" + model + "' ran out of memory: " + message);
  switch (stage) {
    case OpenCvStage::kSetInputs: return Internal("model '" + model + "': cannot set the inputs: " + message);
    case OpenCvStage::kForward: return InvalidArgument("model '" + model + "' rejected its inputs: " + message);
    case OpenCvStage::kOther: break;
  }
  return Internal("model '" + model + "': " + message);
}

}  // namespace weft
