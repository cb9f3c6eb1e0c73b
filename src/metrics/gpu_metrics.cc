#include "metrics/gpu_metrics.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>

#include "base/stoppable_sleep.h"
#include "base/thread_name.h"

namespace weft {
namespace {

// The few NVML declarations used, written out so that a build without the CUDA toolkit's nvml.h compiles the same;
// they are NVML's stable C ABI (nvml.h: the _v2 entry points, the structs' layouts, NVML_SUCCESS = 0).
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr unsigned int kUuidBufferBytes = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr unsigned int kMaxGpus = 64;

class NvmlSource final : public GpuSource {
 public:
  static Result<std::unique_ptr<GpuSource>> Open() {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return NotFound("no NVML (libnvidia-ml.so.1): " + std::string(dlerror()));
    auto source = std::unique_ptr<NvmlSource>(new NvmlSource(library));
    if (!source->Resolve()) return NotFound("NVML lacks a function weft reads: " + std::string(dlerror()));
    if (NvmlReturn r = source->init_(); r != kNvmlSuccess) {
      return Internal("NVML failed to initialise (nvmlInit_v2 returned " + std::to_string(r) + ")");
    }
    source->initialised_ = true;
    unsigned int count = 0;
    if (source->count_(&count) != kNvmlSuccess || count == 0) return NotFound("NVML sees no GPU");
    for (unsigned int i = 0; i < std::min(count, kMaxGpus); ++i) {
      NvmlDevice device = nullptr;
      char uuid[kUuidBufferBytes] = {};
      if (source->handle_(i, &device) != kNvmlSuccess || source->uuid_(device, uuid, sizeof(uuid)) != kNvmlSuccess) {
        continue;
      }
      source->devices_.push_back({device, std::string(uuid, strnlen(uuid, sizeof(uuid)))});
    }
    if (source->devices_.empty()) return NotFound("NVML named no GPU");
    return std::unique_ptr<GpuSource>(std::move(source));
  }

  ~NvmlSource() override {
    if (initialised_) shutdown_();
    dlclose(library_);
  }

  std::vector<GpuReading> Read() override {
    std::vector<GpuReading> readings;
    for (const auto& [device, uuid] : devices_) {
      GpuReading r{.uuid = uuid};
      if (NvmlUtilization u; utilization_(device, &u) == kNvmlSuccess) r.utilization = u.gpu / 100.0;
      if (NvmlMemory m; memory_(device, &m) == kNvmlSuccess) {
        r.memory_total_bytes = static_cast<double>(m.total);
        r.memory_used_bytes = static_cast<double>(m.used);
      }
      if (unsigned int mw; power_(device, &mw) == kNvmlSuccess) r.power_watts = mw / 1000.0;
      if (unsigned int mw; power_limit_(device, &mw) == kNvmlSuccess) r.power_limit_watts = mw / 1000.0;
      if (unsigned long long mj; energy_(device, &mj) == kNvmlSuccess) r.energy_joules = mj / 1000.0;
      readings.push_back(std::move(r));
    }
    return readings;
  }

 private:
  explicit NvmlSource(void* library) : library_(library) {}

  template <typename F>
  bool Load(F* f, const char* name) {
    *f = reinterpret_cast<F>(dlsym(library_, name));
    return *f != nullptr;
  }
  bool Resolve() {
    return Load(&init_, "nvmlInit_v2") && Load(&shutdown_, "nvmlShutdown") && Load(&count_, "nvmlDeviceGetCount_v2") &&
           Load(&handle_, "nvmlDeviceGetHandleByIndex_v2") && Load(&uuid_, "nvmlDeviceGetUUID") &&
           Load(&utilization_, "nvmlDeviceGetUtilizationRates") && Load(&memory_, "nvmlDeviceGetMemoryInfo") &&
           Load(&power_, "nvmlDeviceGetPowerUsage") && Load(&power_limit_, "nvmlDeviceGetEnforcedPowerLimit") &&
           Load(&energy_, "nvmlDeviceGetTotalEnergyConsumption");
  }

  void* const library_;
  bool initialised_ = false;
  std::vector<std::pair<NvmlDevice, std::string>> devices_;
  NvmlReturn (*init_)() = nullptr;
  NvmlReturn (*shutdown_)() = nullptr;
  NvmlReturn (*count_)(unsigned int*) = nullptr;
  NvmlReturn (*handle_)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*uuid_)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization_)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory_)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*power_)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*power_limit_)(NvmlDevice, unsigned int*) = nullptr;
  NvmlReturn (*energy_)(NvmlDevice, unsigned long long*) = nullptr;
};

}  // namespace

Result<std::unique_ptr<GpuSource>> OpenNvml() { return NvmlSource::Open(); }

void GpuMetrics::SetGauge(const char* name, const char* help, const std::string& uuid, std::optional<double> value) {
  if (value) registry_->GetGauge(name, help, {{"gpu_uuid", uuid}})->Set(*value);
}

void GpuMetrics::Update(const std::vector<GpuReading>& readings) {
  for (const GpuReading& r : readings) {
    SetGauge("nv_gpu_utilization", "Share of NVML's last sample period in which a kernel ran, 0 to 1", r.uuid,
             r.utilization);
    SetGauge("nv_gpu_memory_total_bytes", "Memory of the GPU, bytes", r.uuid, r.memory_total_bytes);
    SetGauge("nv_gpu_memory_used_bytes", "Memory in use on the GPU by every process, bytes", r.uuid,
             r.memory_used_bytes);
    SetGauge("nv_gpu_power_usage", "Power drawn by the GPU, watts", r.uuid, r.power_watts);
    SetGauge("nv_gpu_power_limit", "Enforced power limit of the GPU, watts", r.uuid, r.power_limit_watts);
    if (!r.energy_joules) continue;
    Series& series = series_[r.uuid];
    if (series.energy == nullptr) {
      series.energy = registry_->GetCounter(
          "nv_energy_consumption", "Energy used by the GPU since weft started, joules", {{"gpu_uuid", r.uuid}});
    }
    // NVML's total restarts when the driver reloads: a smaller reading is a new baseline, never a negative step.
    if (series.last_energy_joules && *r.energy_joules > *series.last_energy_joules) {
      series.energy->Increment(*r.energy_joules - *series.last_energy_joules);
    }
    series.last_energy_joules = r.energy_joules;
  }
}

GpuMetricsPoller::GpuMetricsPoller(std::unique_ptr<GpuSource> source, MetricsRegistry* registry,
                                   std::chrono::milliseconds interval)
    : source_(std::move(source)), metrics_(registry) {
  thread_ = std::jthread([this, interval](std::stop_token stop) {
    SetCurrentThreadName("gpu-metrics");
    do {
      metrics_.Update(source_->Read());
    } while (SleepUnlessStopped(stop, interval));
  });
}

GpuMetricsPoller::~GpuMetricsPoller() = default;

}  // namespace weft
