#include "backends/torchscript/torch_errors.h"

#include <c10/util/Exception.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <new>
#include <stdexcept>

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The Status for what `thrower` throws, as the backend catches it.
Status StatusOf(const std::function<void()>& thrower, TorchStage stage) {
  try {
    thrower();
  } catch (const std::exception& e) {
    return TorchExecutionError(e, "m", stage);
  }
  return Status::Ok();
}

// What the TorchScript interpreter rethrows for an error inside forward(): only the text survives.
std::runtime_error Rethrown(const std::string& error) {
  return std::runtime_error(
      "The following operation failed in the TorchScript interpreter.\n"
      "Traceback of TorchScript (most recent call last):\n"
      "  File \"/home/someone/export.py\", line 7, in forward\n"
      "    return self.net(x)\n"
      "RuntimeError: " +
      error + "\n");
}

TEST(TorchExecutionErrorTest, OutOfMemoryErrorIsOutOfMemoryAtEveryStage) {
  for (TorchStage stage : {TorchStage::kForward, TorchStage::kOther}) {
    Status status = StatusOf(
        [] { TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB"); }, stage);
    EXPECT_EQ(status.code(), StatusCode::kOutOfMemory);
    EXPECT_EQ(status.message(), "model 'm' ran out of memory: CUDA out of memory. Tried to allocate 2.00 GiB");
  }
}

TEST(TorchExecutionErrorTest, BadAllocIsOutOfMemory) {
  EXPECT_TRUE(IsTorchOutOfMemory(std::bad_alloc()));
  EXPECT_EQ(StatusOf([] { throw std::bad_alloc(); }, TorchStage::kForward).code(), StatusCode::kOutOfMemory);
  EXPECT_EQ(StatusOf([] { throw std::bad_array_new_length(); }, TorchStage::kOther).code(), StatusCode::kOutOfMemory);
}

// Inside forward() the interpreter turns every error into text: allocators' failures are recognized by it.
TEST(TorchExecutionErrorTest, AllocatorMessagesAreOutOfMemoryAfterTheInterpreter) {
  for (const std::string& error : {
           std::string("CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 79.11 GiB total capacity)"),
           std::string("[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: "
                       "you tried to allocate 1152921504606846976 bytes. Error code 12 (Cannot allocate memory)"),
           std::string("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
                       "to allocate 1152921504606846976 bytes."),
           std::string("std::bad_alloc"),
           std::string(kWeftTorchOutOfMemory) + ": cannot map 1152921504606846976 bytes for a tensor",
       }) {
    Status status = StatusOf([&] { throw Rethrown(error); }, TorchStage::kForward);
    EXPECT_EQ(status.code(), StatusCode::kOutOfMemory) << error;
    // Clients get the error's line, not the model's source or the exporting machine's paths.
    EXPECT_EQ(status.message(), "model 'm' ran out of memory: RuntimeError: " + error);
  }
}

TEST(TorchExecutionErrorTest, OtherErrorsAreTheModelsInsideForwardAndInternalOutside) {
  Status forward = StatusOf([] { throw Rethrown("The size of tensor a (3) must match the size of tensor b (4)"); },
                            TorchStage::kForward);
  EXPECT_EQ(forward.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      forward.message(),
      "model 'm' rejected its inputs: RuntimeError: The size of tensor a (3) must match the size of tensor b (4)");

  auto check = [] { TORCH_CHECK(false, "expected a CUDA tensor"); };
  Status in_forward = StatusOf(check, TorchStage::kForward);
  EXPECT_EQ(in_forward.code(), StatusCode::kInvalidArgument);
  Status outside = StatusOf(check, TorchStage::kOther);
  EXPECT_EQ(outside.code(), StatusCode::kInternal);
  EXPECT_EQ(outside.message(), "model 'm': expected a CUDA tensor");  // no C++ backtrace
  EXPECT_THAT(outside.message(), Not(HasSubstr("Exception raised from")));
  EXPECT_FALSE(IsTorchOutOfMemory(std::runtime_error("out of range")));
}

}  // namespace
}  // namespace weft
