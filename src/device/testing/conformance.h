#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "device/device.h"

namespace weft::testing {

// One implementation of the device layer, as the conformance suite (conformance_tests.cc) runs it. Each test
// binary that instantiates the suite compiles conformance_tests.cc itself (a test in a static library would not be
// linked in).
struct DeviceUnderTest {
  std::string name;
  std::function<Result<std::unique_ptr<Device>>()> create;
  // Work that keeps its stream busy for about `duration`: the CPU device sleeps on a worker, CUDA spins a kernel.
  std::function<std::function<Status(const NativeStream&)>(std::chrono::microseconds duration)> busy;
  // Empty when the machine has this device; otherwise why the tests skip (no GPU).
  std::function<std::string()> unavailable;
  // The priority of the streams a test makes without naming one: kHigh runs the suite on the CUDA device's polled
  // completion path.
  StreamPriority stream_priority = StreamPriority::kNormal;
};
// (Every device under test has at least two ways to run work at once: two CPU workers, or a GPU.)

class DeviceConformanceTest : public ::testing::TestWithParam<DeviceUnderTest> {
 protected:
  void SetUp() override {
    if (std::string why = GetParam().unavailable(); !why.empty()) GTEST_SKIP() << why;
    auto device = GetParam().create();
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    device_ = std::move(device).value();
  }

  std::unique_ptr<Stream> NewStream(std::string name, std::optional<StreamPriority> priority = std::nullopt) {
    auto stream =
        device_->CreateStream({.name = std::move(name), .priority = priority.value_or(GetParam().stream_priority)});
    EXPECT_TRUE(stream.ok()) << stream.status().ToString();
    return stream.ok() ? std::move(stream).value() : nullptr;
  }
  std::function<Status(const NativeStream&)> Busy(std::chrono::microseconds d) { return GetParam().busy(d); }

  std::unique_ptr<Device> device_;
};

inline void PrintTo(const DeviceUnderTest& device, std::ostream* os) { *os << device.name; }
inline std::string DeviceName(const ::testing::TestParamInfo<DeviceUnderTest>& info) { return info.param.name; }

}  // namespace weft::testing
