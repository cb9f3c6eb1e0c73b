#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "metrics/metrics.h"

namespace weft {

// Triton's per-GPU families on /metrics (label gpu_uuid), read from NVML every --metrics-interval-ms:
//   nv_gpu_utilization         gauge, 0..1 (NVML's share of the last sample period in which a kernel ran)
//   nv_gpu_memory_total_bytes  gauge
//   nv_gpu_memory_used_bytes   gauge
//   nv_gpu_power_usage         gauge, watts
//   nv_gpu_power_limit         gauge, watts
//   nv_energy_consumption      counter, joules since the server started
// A value NVML does not give for a GPU (power on some boards) has no series.

// What one GPU reported at one moment.
struct GpuReading {
  std::string uuid;  // "GPU-..."
  std::optional<double> utilization;
  std::optional<double> memory_total_bytes;
  std::optional<double> memory_used_bytes;
  std::optional<double> power_watts;
  std::optional<double> power_limit_watts;
  std::optional<double> energy_joules;  // since the driver loaded
};

// Where readings come from: NVML in the server, a fake in tests.
class GpuSource {
 public:
  virtual ~GpuSource() = default;
  virtual std::vector<GpuReading> Read() = 0;
};

// NVML, loaded at run time (libnvidia-ml.so.1 comes with the driver, so a build without a GPU runs unchanged).
// NotFound when the library is missing (no driver) or sees no GPU; Internal when it fails to initialise.
Result<std::unique_ptr<GpuSource>> OpenNvml();

// Turns readings into the families above. Not thread-safe: one poller calls it.
class GpuMetrics {
 public:
  explicit GpuMetrics(MetricsRegistry* registry) : registry_(registry) {}
  void Update(const std::vector<GpuReading>& readings);

 private:
  struct Series {
    std::optional<double> last_energy_joules;
    Counter* energy = nullptr;
  };
  void SetGauge(const char* name, const char* help, const std::string& uuid, std::optional<double> value);

  MetricsRegistry* const registry_;
  std::map<std::string, Series> series_;  // by uuid
};

// Reads `source` now and then every `interval` on a thread of its own ("gpu-metrics") until destroyed.
class GpuMetricsPoller {
 public:
  GpuMetricsPoller(std::unique_ptr<GpuSource> source, MetricsRegistry* registry, std::chrono::milliseconds interval);
  ~GpuMetricsPoller();
  GpuMetricsPoller(const GpuMetricsPoller&) = delete;
  GpuMetricsPoller& operator=(const GpuMetricsPoller&) = delete;

 private:
  std::unique_ptr<GpuSource> source_;
  GpuMetrics metrics_;
  std::jthread thread_;  // last: stops and joins before the members it uses go
};

}  // namespace weft
