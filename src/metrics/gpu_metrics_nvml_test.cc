// NVML as the driver gives it: on a machine without one, a clear NotFound; with one, a reading per GPU with Triton's
// values in range. ctest label `gpu`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "metrics/gpu_metrics.h"

namespace weft {
namespace {

TEST(GpuMetricsNvmlTest, NvmlReadsEveryGpuOrSaysWhyNot) {
  Result<std::unique_ptr<GpuSource>> nvml = OpenNvml();
  if (!nvml.ok()) {
    EXPECT_EQ(nvml.status().code(), StatusCode::kNotFound) << nvml.status().ToString();
    GTEST_SKIP() << nvml.status().ToString();
  }
  std::vector<GpuReading> readings = (*nvml)->Read();
  ASSERT_FALSE(readings.empty());
  for (const GpuReading& r : readings) {
    EXPECT_THAT(r.uuid, ::testing::StartsWith("GPU-"));
    ASSERT_TRUE(r.utilization.has_value());
    EXPECT_GE(*r.utilization, 0.0);
    EXPECT_LE(*r.utilization, 1.0);
    ASSERT_TRUE(r.memory_total_bytes.has_value());
    EXPECT_GT(*r.memory_total_bytes, 0);
    EXPECT_LE(*r.memory_used_bytes, *r.memory_total_bytes);
    if (r.power_watts) {
      ASSERT_TRUE(r.power_limit_watts.has_value());
      EXPECT_GT(*r.power_limit_watts, 0);
    }
  }
  MetricsRegistry registry;
  GpuMetrics metrics(&registry);
  metrics.Update(readings);
  EXPECT_THAT(registry.Exposition(), ::testing::HasSubstr("nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-"));
}

}  // namespace
}  // namespace weft
