#include "metrics/gpu_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace weft {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GpuReading Full(const std::string& uuid, double energy) {
  return {.uuid = uuid,
          .utilization = 0.25,
          .memory_total_bytes = 150754820096,
          .memory_used_bytes = 644939776,
          .power_watts = 81.513,
          .power_limit_watts = 700,
          .energy_joules = energy};
}

TEST(GpuMetricsTest, EachGpuGetsTritonsFamiliesInTritonsUnits) {
  MetricsRegistry registry;
  GpuMetrics metrics(&registry);
  metrics.Update({Full("GPU-a", 3193.07), Full("GPU-b", 10)});
  const std::string text = registry.Exposition();
  EXPECT_THAT(text, HasSubstr("# TYPE nv_gpu_utilization gauge"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 0.25\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_memory_total_bytes{gpu_uuid=\"GPU-a\"} 150754820096\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-b\"} 644939776\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_power_usage{gpu_uuid=\"GPU-a\"} 81.513\n"));
  EXPECT_THAT(text, HasSubstr("nv_gpu_power_limit{gpu_uuid=\"GPU-b\"} 700\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE nv_energy_consumption counter"));
  // Since the server started, not since the driver loaded: the first reading is the baseline.
  EXPECT_THAT(text, HasSubstr("nv_energy_consumption{gpu_uuid=\"GPU-a\"} 0\n"));
}

TEST(GpuMetricsTest, EnergyCountsWhatWasSpentSinceTheFirstReadingAndNeverGoesBack) {
  MetricsRegistry registry;
  GpuMetrics metrics(&registry);
  Counter* energy = registry.GetCounter("nv_energy_consumption", "", {{"gpu_uuid", "GPU-a"}});
  metrics.Update({Full("GPU-a", 1000)});
  metrics.Update({Full("GPU-a", 1003.5)});
  EXPECT_DOUBLE_EQ(energy->value(), 3.5);
  metrics.Update({Full("GPU-a", 2)});  // the driver reloaded: a new baseline
  EXPECT_DOUBLE_EQ(energy->value(), 3.5);
  metrics.Update({Full("GPU-a", 4)});
  EXPECT_DOUBLE_EQ(energy->value(), 5.5);
}

TEST(GpuMetricsTest, AValueTheGpuDoesNotReportHasNoSeries) {
  MetricsRegistry registry;
  GpuMetrics metrics(&registry);
  metrics.Update({{.uuid = "GPU-a", .utilization = 1.0}});
  const std::string text = registry.Exposition();
  EXPECT_THAT(text, HasSubstr("nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("nv_gpu_power_usage")));
  EXPECT_THAT(text, Not(HasSubstr("nv_energy_consumption")));
}

class CountingSource : public GpuSource {
 public:
  std::vector<GpuReading> Read() override {
    const int n = ++reads;
    return {{.uuid = "GPU-a", .utilization = n / 100.0}};
  }
  std::atomic<int> reads{0};
};

bool AwaitReads(const CountingSource& source, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (source.reads < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return source.reads >= n;
}

TEST(GpuMetricsTest, ThePollerReadsOnItsIntervalAndStopsWhenDestroyed) {
  MetricsRegistry registry;
  auto source = std::make_unique<CountingSource>();
  CountingSource* counting = source.get();
  {
    GpuMetricsPoller poller(std::move(source), &registry, std::chrono::milliseconds(5));
    ASSERT_TRUE(AwaitReads(*counting, 3));
  }  // the destructor joins; the source went with it
  EXPECT_GE(registry.GetGauge("nv_gpu_utilization", "", {{"gpu_uuid", "GPU-a"}})->value(), 0.03);
}

TEST(GpuMetricsTest, ThePollerReadsAtOnceNotAfterItsFirstInterval) {
  MetricsRegistry registry;
  auto source = std::make_unique<CountingSource>();
  CountingSource* counting = source.get();
  GpuMetricsPoller poller(std::move(source), &registry, std::chrono::hours(1));
  ASSERT_TRUE(AwaitReads(*counting, 1));
  EXPECT_EQ(counting->reads, 1);
  // And the destructor does not wait out the hour.
}

}  // namespace
}  // namespace weft
