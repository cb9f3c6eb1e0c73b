// The conformance suite on the CUDA device, and what only a GPU shows. Every test skips where there is no GPU (or
// no CUDA in the build); ctest label `gpu`.
#include "device/cuda/cuda_device.h"

#include <gtest/gtest.h>

#include "device/completion_loop.h"
#include "device/testing/conformance.h"

namespace weft {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using testing::DeviceConformanceTest;

testing::DeviceUnderTest CudaUnderTest(bool poll_high) {
  return {
      .name = poll_high ? "cuda_polled_high" : "cuda",
      .create = [poll_high] { return CreateCudaDevice({.poll_high_completions = poll_high}); },
      .busy =
          [](microseconds d) {
            return [d](const NativeStream& stream) { return LaunchSpinKernel(stream, d, /*blocks=*/1); };
          },
      .unavailable = [] { return CudaUnavailableReason(); },
      .stream_priority = poll_high ? StreamPriority::kHigh : StreamPriority::kNormal,
  };
}

// The second instance watches kHigh streams with the polling thread instead of host functions.
INSTANTIATE_TEST_SUITE_P(Cuda, DeviceConformanceTest, ::testing::Values(CudaUnderTest(false), CudaUnderTest(true)),
                         testing::DeviceName);

class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = CudaUnavailableReason(); !why.empty()) GTEST_SKIP() << why;
    auto device = CreateCudaDevice({});
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
  }
  std::unique_ptr<Device> device_;
};

// Kernels on two streams overlap on the GPU: two 100 ms single-block spins take about 100 ms, not 200.
TEST_F(CudaDeviceTest, KernelsOnDifferentStreamsOverlap) {
  auto a = device_->CreateStream({.name = "a"});
  auto b = device_->CreateStream({.name = "b"});
  ASSERT_TRUE(a.ok() && b.ok());
  const auto start = std::chrono::steady_clock::now();
  (*a)->Enqueue({.run = [](const NativeStream& s) { return LaunchSpinKernel(s, milliseconds(100), 1); }});
  (*b)->Enqueue({.run = [](const NativeStream& s) { return LaunchSpinKernel(s, milliseconds(100), 1); }});
  (*a)->Synchronize();
  (*b)->Synchronize();
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(180));
}

// A host function blocks later work in its own stream; the completion's side stream keeps it off the work's stream.
// A chain of short kernels with a completion after each runs at kernel speed.
TEST_F(CudaDeviceTest, CompletionsDoNotSerializeTheStream) {
  auto s = device_->CreateStream({.name = "s"});
  ASSERT_TRUE(s.ok());
  std::atomic<int> done{0};
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) {
    (*s)->Enqueue({.run = [](const NativeStream& n) { return LaunchSpinKernel(n, microseconds(100), 1); },
                   .on_done =
                       [&](const Completion& c) {
                         EXPECT_TRUE(c.status.ok()) << c.status.ToString();
                         done++;
                       }});
  }
  (*s)->Synchronize();
  EXPECT_EQ(done.load(), 200);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(19));
  RecordProperty("chain_ms", std::to_string(std::chrono::duration<double, std::milli>(elapsed).count()));
}

TEST_F(CudaDeviceTest, PinnedAndDeviceMemoryReportTheirPlace) {
  auto s = device_->CreateStream({.name = "s"});
  ASSERT_TRUE(s.ok());
  auto host = device_->AllocateHost(100);
  auto gpu = device_->AllocateDevice(100, **s);
  ASSERT_TRUE(host.ok() && gpu.ok());
  EXPECT_EQ(host->place.kind, MemoryKind::kCpuPinned);
  EXPECT_EQ(gpu->place.kind, MemoryKind::kGpu);
}

TEST(CudaSelectionTest, AutoFallsBackToTheCpuWithoutAGpu) {
  auto device = OpenDevice({.choice = DeviceChoice::kAuto, .cpu_workers = 3});
  ASSERT_TRUE(device.ok());
  if (CudaUnavailableReason().empty()) {
    EXPECT_EQ((*device)->kind(), DeviceKind::kCuda);
  } else {
    EXPECT_EQ((*device)->kind(), DeviceKind::kCpu);
    EXPECT_EQ(OpenDevice({.choice = DeviceChoice::kCuda}).status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ((*OpenDevice({.choice = DeviceChoice::kCpu}))->kind(), DeviceKind::kCpu);
  EXPECT_EQ(ParseDeviceChoice("gpu").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseDeviceChoice("cuda"), DeviceChoice::kCuda);
}

}  // namespace
}  // namespace weft
