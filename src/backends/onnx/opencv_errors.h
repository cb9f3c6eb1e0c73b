#pragma once

#include <exception>
#include <string>

#include "base/status.h"

namespace weft {

// How the ONNX backend turns OpenCV's exceptions into a Status. Internal to the backend; pure functions.

// Where in an execution OpenCV threw: decides what an error other than out of memory means.
enum class OpenCvStage {
  kSetInputs,  // handing the inputs to the Net: a runtime fault
  kForward,    // Net::forward: the inputs matched the config, so the model rejected them
  kOther,      // anything else (the outputs): a runtime fault
};

// Whether `e` reports a failed allocation: OpenCV's cv::Exception with code cv::Error::StsNoMem (its allocator's
// "Failed to allocate N bytes"), or a std::bad_alloc from the standard library.
bool IsOpenCvOutOfMemory(const std::exception& e);

// The Status for `e`, thrown by OpenCV while model `model` executed at `stage`: OutOfMemory "model '<model>' ran out
// of memory: ..." for a failed allocation; otherwise Internal "model '<model>': cannot set the inputs: ...",
// InvalidArgument "model '<model>' rejected its inputs: ..." or Internal "model '<model>': ...". The message is
// OpenCV's description, without the version, file and function around it.
Status OpenCvExecutionError(const std::exception& e, const std::string& model, OpenCvStage stage);

}  // namespace weft
