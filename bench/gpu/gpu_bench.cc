// The perception mix of issue 4, in-process on one device: a detection-like model (high priority, 4 cameras at
// 30 Hz), a segmentation-like model (normal priority, 2 cameras at 15 Hz) and a classification-like model (best
// effort, saturating: closed loop), TorchScript files made by make_models.py. Builds without any network library
// or protobuf (configs are built here), so it builds on a machine with only a compiler, CMake, CUDA and libtorch.
// With --models stand-in the three models are gpu_spin kernels instead (for a build without libtorch): the
// multiplexer's part of the story without the models'.
//
//   weft_gpu_bench --models DIR|stand-in --arm A|B|C|D|E|F|G [--only det|seg|cls] [--duration 20] [--warmup 4]
//                  [--device auto|cuda|cpu] [--cls-clients 64] [--be-inflight 1] [--out FILE.json]
//
// Arms: A each model alone (--only); B one stream shared in FIFO order; C a stream per model; D C plus stream
// priorities; E D plus the bound on best-effort batches in flight. F and G: E with three instances of each model on
// two streams per class, assigned by measured load (F) or fixed where they start (G), the best-effort bound held
// device-wide. Writes one JSON object (see bench/gpu/run.sh).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/backends.h"
#include "base/json_string.h"
#include "base/log.h"
#include "device/cuda/cuda_device.h"
#include "engine/engine.h"
#include "multiplexer/multiplexer.h"
#include "repository/repository.h"

namespace weft {
namespace {

using Clock = std::chrono::steady_clock;

struct ModelSpec {
  std::string name;
  ModelPriority priority;
  int max_batch;
  int cameras = 0;  // open loop: cameras at `hz`; 0 = closed loop with `clients`
  double hz = 0;
  int clients = 0;
  double deadline_ms;  // a result within this time of its frame's arrival counts towards goodput
  Shape input;         // without the batch dim; from models.txt
  Shape output;
  DataType type = DataType::kFp16;
  // --models stand-in: a gpu_spin kernel of spin_us + item_spin_us per item on `blocks` blocks of 128 threads.
  int spin_us = 0;
  int item_spin_us = 0;
  int blocks = 0;
};

constexpr char kStandIn[] = "stand-in";

struct Flags {
  std::string models_dir;
  std::string arm = "E";
  std::string only;
  double duration_s = 20;
  double warmup_s = 4;
  std::string device = "auto";
  int cls_clients = 64;
  int be_inflight = 1;
  std::string out;
};

Shape ParseDims(const std::string& text) {
  Shape s;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) s.push_back(std::stoll(part));
  return s;
}

// models.txt: one line per model, "<name> <input dims> <output dims> <FP16|FP32>", dims as 3x384x640 (no batch
// dim).
Status ReadShapes(const std::string& dir, std::vector<ModelSpec>* specs) {
  std::ifstream in(dir + "/models.txt");
  if (!in) return NotFound("no " + dir + "/models.txt (run make_models.py first)");
  std::string name, input, output, type;
  while (in >> name >> input >> output >> type) {
    for (ModelSpec& s : *specs) {
      if (s.name == name) {
        s.input = ParseDims(input);
        s.output = ParseDims(output);
        s.type = type == "FP32" ? DataType::kFp32 : DataType::kFp16;
      }
    }
  }
  for (const ModelSpec& s : *specs) {
    if (s.input.empty()) return NotFound("models.txt has no line for '" + s.name + "'");
  }
  return Status::Ok();
}

int InstancesOf(const std::string& arm) { return arm == "F" || arm == "G" ? 3 : 1; }

ModelConfig ConfigOf(const ModelSpec& spec, bool stand_in, int instances) {
  ModelConfig c;
  c.name = spec.name;
  if (stand_in) {
    c.backend = "weft_builtin";
    c.parameters = {{"builtin", "gpu_spin"},
                    {"spin_us", std::to_string(spec.spin_us)},
                    {"item_spin_us", std::to_string(spec.item_spin_us)},
                    {"blocks", std::to_string(spec.blocks)},
                    {"threads_per_block", "128"}};
  } else {
    c.platform = "pytorch_libtorch";
    c.backend = "pytorch";
  }
  c.max_batch_size = spec.max_batch;
  c.inputs = {{"INPUT0", spec.type, spec.input, std::nullopt}};
  c.outputs = {{"OUTPUT0", spec.type, spec.output, std::nullopt}};
  c.instance_groups = {{.name = spec.name, .count = instances, .kind = InstanceKind::kGpu, .gpus = {0}}};
  c.dynamic_batching = DynamicBatchingConfig{.max_queue_delay_us = 0};
  c.priority = spec.priority;
  return c;
}

MultiplexerOptions ArmOptions(const std::string& arm, int be_inflight, double horizon_s) {
  MultiplexerOptions m;
  m.busy_horizon = std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(horizon_s));
  m.load_balance = false;
  m.streams_per_class = 1;  // one model per class: a stream per model
  m.best_effort_max_inflight = 0;
  m.best_effort_budget = 0;
  m.stream_priorities = false;
  if (arm == "B") m.single_stream = true;
  if (arm != "B" && arm != "C") m.stream_priorities = true;
  if (arm == "E" || arm == "F" || arm == "G") m.best_effort_max_inflight = be_inflight;
  if (arm == "F" || arm == "G") {
    m.streams_per_class = 2;
    m.best_effort_budget = be_inflight;
    m.load_balance = arm == "F";
  }
  return m;
}

// Latencies of one model inside the measured window. Thread-safe.
struct Record {
  std::mutex mu;
  std::vector<double> latency_ms;  // guarded by mu: answered OK, arrived inside the window
  uint64_t sent = 0;               // guarded by mu: arrived inside the window
  uint64_t errors = 0;             // guarded by mu
  std::string first_error;         // guarded by mu
  uint64_t within_deadline = 0;    // guarded by mu
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::min(v.size() - 1, i == 0 ? 0 : i - 1)];
}

// float -> IEEE half for inputs in [0.01, 1): normal halves, truncated mantissa.
uint16_t HalfBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exponent <= 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | ((bits & 0x7fffffu) >> 13));
}

class Load {
 public:
  Load(Engine* engine, std::vector<ModelSpec> specs, SteadyTime window_start, SteadyTime window_end)
      : engine_(engine), specs_(std::move(specs)), start_(window_start), end_(window_end) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> pixel(0.01f, 1.0f);
    for (const ModelSpec& s : specs_) {
      Shape shape = s.input;
      shape.insert(shape.begin(), 1);
      // A few random frames per model, taken in turn and shared by the requests (tensors are immutable views):
      // never zeros, which can run faster than real data.
      for (int i = 0; i < kFramesPerModel; ++i) {
        std::byte* data;
        Tensor frame = Tensor::Allocate("INPUT0", s.type, shape, &data);
        const size_t n = frame.byte_size() / DataTypeSize(s.type);
        for (size_t j = 0; j < n; ++j) {
          const float v = pixel(rng);
          if (s.type == DataType::kFp16) {
            const uint16_t h = HalfBits(v);
            std::memcpy(data + 2 * j, &h, 2);
          } else {
            std::memcpy(data + 4 * j, &v, 4);
          }
        }
        inputs_[s.name].push_back(std::move(frame));
      }
      records_[s.name] = std::make_unique<Record>();
    }
  }

  // Runs the cameras and the closed-loop clients until the window's end, then waits for what is outstanding.
  void Run() {
    for (const ModelSpec& s : specs_) {
      for (int c = 0; c < s.clients; ++c) SubmitClosedLoop(&s);
    }
    RunCameras();
    stop_ = true;
    std::unique_lock lock(mu_);
    drained_.wait_for(lock, std::chrono::seconds(10), [this] { return outstanding_ == 0; });
  }

  Record& record(const std::string& name) { return *records_[name]; }

 private:
  void Submit(const ModelSpec* spec, SteadyTime arrival, bool resubmit) {
    auto request = std::make_unique<InferenceRequest>();
    request->model_name = spec->name;
    const std::vector<Tensor>& frames = inputs_[spec->name];
    request->inputs.push_back(frames[next_frame_.fetch_add(1) % frames.size()]);
    request->arrival = arrival;
    {
      std::lock_guard lock(mu_);
      ++outstanding_;
    }
    const bool measured = arrival >= start_ && arrival < end_;
    Record* record = records_[spec->name].get();
    if (measured) {
      std::lock_guard lock(record->mu);
      record->sent++;
    }
    engine_->Submit(std::move(request), [this, spec, arrival, measured, record, resubmit](Result<InferenceResponse> r) {
      const SteadyTime now = Clock::now();
      const double ms = std::chrono::duration<double, std::milli>(now - arrival).count();
      if (measured) {
        std::lock_guard lock(record->mu);
        if (r.ok()) {
          record->latency_ms.push_back(ms);
          if (ms <= spec->deadline_ms) record->within_deadline++;
        } else if (record->errors++ == 0) {
          record->first_error = r.status().ToString();
        }
      }
      if (resubmit && !stop_.load() && now < end_) Submit(spec, now, true);
      std::lock_guard lock(mu_);
      if (--outstanding_ == 0) drained_.notify_all();
    });
  }

  void SubmitClosedLoop(const ModelSpec* spec) { Submit(spec, Clock::now(), true); }

  // Periodic frames per camera with a random phase and +-1 ms of jitter; latency counts from the frame's time.
  void RunCameras() {
    using Arrival = std::pair<SteadyTime, std::pair<const ModelSpec*, int>>;
    std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> next;
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> unit(0, 1);
    const SteadyTime t0 = Clock::now();
    for (const ModelSpec& s : specs_) {
      for (int c = 0; c < s.cameras; ++c) {
        auto phase = std::chrono::duration<double>(unit(rng) / s.hz);
        next.push({t0 + std::chrono::duration_cast<SteadyTime::duration>(phase), {&s, c}});
      }
    }
    while (!next.empty()) {
      auto [when, who] = next.top();
      next.pop();
      if (when >= end_) break;
      std::this_thread::sleep_until(when);
      Submit(who.first, when, false);
      auto period = std::chrono::duration<double>(1.0 / who.first->hz + (unit(rng) - 0.5) * 0.002);
      next.push({when + std::chrono::duration_cast<SteadyTime::duration>(period), who});
    }
    if (next.empty()) std::this_thread::sleep_until(end_);  // closed loop only
  }

  Engine* const engine_;
  const std::vector<ModelSpec> specs_;
  const SteadyTime start_;
  const SteadyTime end_;
  static constexpr int kFramesPerModel = 8;
  std::map<std::string, std::vector<Tensor>> inputs_;
  std::atomic<uint64_t> next_frame_{0};
  std::map<std::string, std::unique_ptr<Record>> records_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable drained_;
  int64_t outstanding_ = 0;  // guarded by mu_
};

int Main(const Flags& flags) {
  std::vector<ModelSpec> specs = {
      {.name = "det", .priority = ModelPriority::kMax, .max_batch = 4, .cameras = 4, .hz = 30, .deadline_ms = 33.3},
      {.name = "seg", .priority = ModelPriority::kDefault, .max_batch = 2, .cameras = 2, .hz = 15, .deadline_ms = 66.7},
      {.name = "cls",
       .priority = ModelPriority::kMin,
       .max_batch = 32,
       .clients = flags.cls_clients,
       .deadline_ms = 200},
  };
  const bool stand_in = flags.models_dir == kStandIn;
  if (stand_in) {
    // Roughly the shape of the real mix on a large GPU: det and seg a few ms per batch over half the SMs, cls short
    // kernels over all of them.
    const int sms = 132;
    for (ModelSpec& s : specs) {
      s.input = s.output = {4};
      s.type = DataType::kFp32;
      s.blocks = s.name == "cls" ? 2 * sms : sms / 2;
      s.spin_us = s.name == "det" ? 1500 : s.name == "seg" ? 3000 : 500;
      s.item_spin_us = s.name == "det" ? 400 : s.name == "seg" ? 1500 : 100;
    }
  } else if (Status s = ReadShapes(flags.models_dir, &specs); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 2;
  }
  if (!flags.only.empty()) std::erase_if(specs, [&](const ModelSpec& s) { return s.name != flags.only; });
  if (specs.empty()) {
    std::fprintf(stderr, "--only: expected det, seg or cls\n");
    return 2;
  }
  auto choice = ParseDeviceChoice(flags.device);
  if (!choice.ok()) {
    std::fprintf(stderr, "%s\n", choice.status().message().c_str());
    return 2;
  }
  auto device = OpenDevice({.choice = *choice, .cpu_workers = 8});
  if (!device.ok()) {
    std::fprintf(stderr, "cannot open the device: %s\n", device.status().message().c_str());
    return 1;
  }

  BackendRegistry backends;
  RegisterAvailableBackends(&backends);
  std::vector<ModelEntry> entries;
  for (const ModelSpec& spec : specs) {
    const int instances = InstancesOf(flags.arm);
    ModelConfig config = ConfigOf(spec, stand_in, instances);
    auto backend = backends.Find(config);
    if (!backend.ok()) {
      std::fprintf(stderr, "%s\n", backend.status().message().c_str());
      return 1;
    }
    auto version = std::make_shared<LoadedVersion>();
    version->version = 1;
    version->config = config;
    version->dir = flags.models_dir + "/" + spec.name + "/1";
    for (int index = 0; index < instances; ++index) {
      auto instance = (*backend)->CreateInstance(config, version->dir, index);
      if (!instance.ok()) {
        std::fprintf(stderr, "model %s: %s\n", spec.name.c_str(), instance.status().message().c_str());
        return 1;
      }
      version->instances.push_back(std::move(instance).value());
    }
    ModelEntry entry;
    entry.name = spec.name;
    entry.config = config;
    entry.versions.push_back(version);
    entries.push_back(std::move(entry));
  }

  MetricsRegistry metrics;
  const double total_s = flags.warmup_s + flags.duration_s;
  auto engine = std::make_unique<Engine>(
      std::move(entries),
      Engine::Options{.device = device->get(), .multiplexer = ArmOptions(flags.arm, flags.be_inflight, total_s + 30)},
      &metrics);
  if (!engine->Ready()) {
    for (const auto& s : engine->States()) std::fprintf(stderr, "%s: %s\n", s.name.c_str(), s.reason.c_str());
    return 1;
  }
  const SteadyTime begin = Clock::now();
  const SteadyTime window_start =
      begin + std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(flags.warmup_s));
  const SteadyTime window_end =
      window_start + std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(flags.duration_s));
  const auto unix_start = std::chrono::system_clock::now() + (window_start - begin);
  Load load(engine.get(), specs, window_start, window_end);
  load.Run();
  const double busy = engine->multiplexer()->BusyFraction(window_start, window_end);

  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(4);
  out << "{\"arm\": " << JsonString(flags.arm) << ", \"only\": " << JsonString(flags.only)
      << ", \"device\": " << JsonString((*device)->Describe()) << ", \"duration_s\": " << flags.duration_s
      << ", \"warmup_s\": " << flags.warmup_s << ", \"cls_clients\": " << flags.cls_clients
      << ", \"be_inflight\": " << flags.be_inflight << ", \"window_unix_s\": ["
      << std::chrono::duration<double>(unix_start.time_since_epoch()).count() << ", "
      << std::chrono::duration<double>(unix_start.time_since_epoch()).count() + flags.duration_s << "]"
      << ", \"busy_fraction\": " << busy << ", \"models\": {";
  double goodput = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ModelSpec& s = specs[i];
    Record& r = load.record(s.name);
    std::lock_guard lock(r.mu);
    const double model_busy = engine->multiplexer()->ModelBusyFraction(s.name, 1, window_start, window_end);
    goodput += r.within_deadline / flags.duration_s;
    out << (i ? ", " : "") << JsonString(s.name) << ": {\"sent\": " << r.sent << ", \"ok\": " << r.latency_ms.size()
        << ", \"errors\": " << r.errors << ", \"first_error\": " << JsonString(r.first_error)
        << ", \"throughput_per_s\": " << r.latency_ms.size() / flags.duration_s
        << ", \"goodput_per_s\": " << r.within_deadline / flags.duration_s << ", \"deadline_ms\": " << s.deadline_ms
        << ", \"p50_ms\": " << Percentile(r.latency_ms, 50) << ", \"p99_ms\": " << Percentile(r.latency_ms, 99)
        << ", \"max_ms\": " << Percentile(r.latency_ms, 100) << ", \"device_ms_per_s\": " << 1000 * model_busy << "}";
  }
  out << "}, \"goodput_per_s\": " << goodput << ", \"streams\": [";
  auto stats = engine->multiplexer()->Stats();
  for (size_t i = 0; i < stats.size(); ++i) {
    out << (i ? ", " : "") << "{\"name\": " << JsonString(stats[i].name) << ", \"instances\": " << stats[i].instances
        << "}";
  }
  out << "]}\n";
  if (flags.out.empty()) {
    std::fputs(out.str().c_str(), stdout);
  } else {
    std::ofstream(flags.out) << out.str();
  }
  std::fprintf(stderr, "arm %s%s: busy %.1f%%, goodput %.1f/s\n", flags.arm.c_str(),
               flags.only.empty() ? "" : (" (" + flags.only + ")").c_str(), 100 * busy, goodput);
  // The engine goes first: it answers whatever is still outstanding, whose callbacks use `load`.
  engine.reset();
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  weft::Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--models")
      flags.models_dir = value();
    else if (a == "--arm")
      flags.arm = value();
    else if (a == "--only")
      flags.only = value();
    else if (a == "--duration")
      flags.duration_s = std::stod(value());
    else if (a == "--warmup")
      flags.warmup_s = std::stod(value());
    else if (a == "--device")
      flags.device = value();
    else if (a == "--cls-clients")
      flags.cls_clients = std::stoi(value());
    else if (a == "--be-inflight")
      flags.be_inflight = std::stoi(value());
    else if (a == "--out")
      flags.out = value();
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (flags.models_dir.empty() || std::string("ABCDEFG").find(flags.arm) == std::string::npos ||
      flags.arm.size() != 1) {
    std::fprintf(stderr, "usage: weft_gpu_bench --models DIR --arm A|B|C|D|E|F|G [--only det|seg|cls] ...\n");
    return 2;
  }
  weft::SetLogLevel(weft::LogLevel::kWarning);
  return weft::Main(flags);
}
