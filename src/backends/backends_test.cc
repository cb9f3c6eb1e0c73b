#include "backends/backends.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

namespace weft {
namespace {

using ::testing::Contains;
using ::testing::Not;

// Set by CMake as 0 or 1 for this test, the same values backends.cc was built with.
constexpr bool kHaveTorchScript = WEFT_HAVE_TORCHSCRIPT_BACKEND;
constexpr bool kHaveOnnx = WEFT_HAVE_ONNX_BACKEND;

ModelConfig Selecting(std::string platform, std::string backend) {
  ModelConfig config;
  config.name = "m";
  config.platform = std::move(platform);
  config.backend = std::move(backend);
  return config;
}

TEST(BackendsTest, RegistersWhatThisBuildHas) {
  BackendRegistry registry;
  RegisterAvailableBackends(&registry);
  auto names = registry.Names();
  EXPECT_THAT(names, Contains("weft_builtin"));
  EXPECT_EQ(std::find(names.begin(), names.end(), "pytorch") != names.end(), kHaveTorchScript);
  EXPECT_EQ(std::find(names.begin(), names.end(), "onnxruntime") != names.end(), kHaveOnnx);

  auto builtin = registry.Find(Selecting("", "weft_builtin"));
  ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
  EXPECT_EQ((*builtin)->DefaultModelFilename(), "");

  for (const auto& [platform, backend, file, built] :
       {std::tuple{"pytorch_libtorch", "pytorch", "model.pt", kHaveTorchScript},
        std::tuple{"onnxruntime_onnx", "onnxruntime", "model.onnx", kHaveOnnx}}) {
    auto by_platform = registry.Find(Selecting(platform, ""));
    auto by_backend = registry.Find(Selecting("", backend));
    EXPECT_EQ(by_platform.ok(), built) << platform;
    EXPECT_EQ(by_backend.ok(), built) << backend;
    if (built && by_platform.ok() && by_backend.ok()) {
      EXPECT_EQ(*by_platform, *by_backend);
      EXPECT_EQ((*by_platform)->DefaultModelFilename(), file);
    }
  }
  EXPECT_FALSE(registry.Find(Selecting("tensorflow_savedmodel", "")).ok());
}

}  // namespace
}  // namespace weft
