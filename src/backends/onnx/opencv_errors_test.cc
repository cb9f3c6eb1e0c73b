#include "backends/onnx/opencv_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <new>
#include <opencv2/core.hpp>
#include <stdexcept>

namespace weft {
namespace {

using ::testing::HasSubstr;

cv::Exception OpenCvError(int code, const std::string& description) {
  return cv::Exception(code, description, "forward", "net.cpp", 42);
}

TEST(OpenCvExecutionErrorTest, FailedAllocationsAreOutOfMemoryAtEveryStage) {
  for (OpenCvStage stage : {OpenCvStage::kSetInputs, OpenCvStage::kForward, OpenCvStage::kOther}) {
    Status no_mem = OpenCvExecutionError(OpenCvError(cv::Error::StsNoMem, "Failed to allocate 1024 bytes"), "m", stage);
    EXPECT_EQ(no_mem.code(), StatusCode::kOutOfMemory);
    EXPECT_EQ(no_mem.message(), "model 'm' ran out of memory: Failed to allocate 1024 bytes");
    Status bad_alloc = OpenCvExecutionError(std::bad_alloc(), "m", stage);
    EXPECT_EQ(bad_alloc.code(), StatusCode::kOutOfMemory);
    EXPECT_THAT(bad_alloc.message(), HasSubstr("model 'm' ran out of memory: "));
  }
}

TEST(OpenCvExecutionErrorTest, OtherErrorsDependOnTheStage) {
  cv::Exception shape = OpenCvError(cv::Error::StsAssert, "inputs[0].size[1] == 3");
  EXPECT_FALSE(IsOpenCvOutOfMemory(shape));
  Status forward = OpenCvExecutionError(shape, "m", OpenCvStage::kForward);
  EXPECT_EQ(forward.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(forward.message(), "model 'm' rejected its inputs: inputs[0].size[1] == 3");  // no version, file, function
  Status inputs = OpenCvExecutionError(shape, "m", OpenCvStage::kSetInputs);
  EXPECT_EQ(inputs.code(), StatusCode::kInternal);
  EXPECT_EQ(inputs.message(), "model 'm': cannot set the inputs: inputs[0].size[1] == 3");
  Status other = OpenCvExecutionError(std::runtime_error("boom"), "m", OpenCvStage::kOther);
  EXPECT_EQ(other.code(), StatusCode::kInternal);
  EXPECT_EQ(other.message(), "model 'm': boom");
}

}  // namespace
}  // namespace weft
