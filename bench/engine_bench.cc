// In-process closed-loop load on the engine, without any network: `concurrency` requests outstanding, each
// resubmitted from its callback, for `seconds`. It measures what the engine and scheduler do with a model (for
// example the batching gain) without the HTTP layer's cost hiding it. Builds without network libraries, so it
// also runs on a machine that has only a compiler, CMake and libtorch.
//
//   weft_engine_bench --repository DIR --model NAME [--model NAME2 ...] [--concurrency 64] [--seconds 5]
//
// Every model gets batch-1 requests of zeros shaped from its config (variable dims become 1).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backends.h"
#include "engine/engine.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "repository/repository.h"

namespace weft {
namespace {

struct Load {
  Engine* engine;
  ModelConfig config;
  std::atomic<bool> stop{false};
  std::atomic<int> outstanding{0};
  std::mutex mu;
  std::condition_variable drained;
  std::vector<double> latencies_us;  // guarded by mu
  uint64_t failures = 0;             // guarded by mu
  std::string first_error;           // guarded by mu

  std::unique_ptr<InferenceRequest> MakeRequest() const {
    auto request = std::make_unique<InferenceRequest>();
    request->model_name = config.name;
    for (const auto& in : config.inputs) {
      Shape shape = FullShape(config, in);
      for (auto& d : shape) d = d < 0 ? 1 : d;
      std::byte* unused;
      request->inputs.push_back(Tensor::Allocate(in.name, in.data_type, shape, &unused));
    }
    return request;
  }

  void SubmitOne() {
    outstanding.fetch_add(1);
    auto start = std::chrono::steady_clock::now();
    engine->Submit(MakeRequest(), [this, start](Result<InferenceResponse> r) {
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
      {
        std::lock_guard lock(mu);
        if (r.ok()) {
          latencies_us.push_back(us);
        } else if (failures++ == 0) {
          first_error = r.status().ToString();
        }
      }
      if (!stop.load()) SubmitOne();
      if (outstanding.fetch_sub(1) == 1) {
        std::lock_guard lock(mu);
        drained.notify_all();
      }
    });
  }
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int Main(int argc, char** argv) {
  std::filesystem::path repository = "examples/models";
  std::vector<std::string> models;
  int concurrency = 64;
  double seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repository")) repository = argv[i + 1];
    if (!std::strcmp(argv[i], "--model")) models.push_back(argv[i + 1]);
    if (!std::strcmp(argv[i], "--concurrency")) concurrency = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
  }
  if (models.empty()) {
    std::fprintf(stderr, "usage: weft_engine_bench --repository DIR --model NAME [--model NAME ...]\n");
    return 2;
  }
  BackendRegistry backends;
  RegisterAvailableBackends(&backends);
  auto entries = LoadRepository({.root = repository,
                                 .parse_config = [](const std::filesystem::path& p) { return ParseModelConfigFile(p); },
                                 .backends = &backends});
  if (!entries.ok()) {
    std::fprintf(stderr, "%s\n", entries.status().ToString().c_str());
    return 1;
  }
  MetricsRegistry metrics;
  Engine engine(std::move(entries).value(), {}, &metrics);
  std::printf(
      "| model | concurrency | seconds | req/s | p50 us | p99 us | failures |\n|---|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& name : models) {
    auto config = engine.FindConfig(name);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
      return 1;
    }
    Load load{.engine = &engine, .config = *config};
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < concurrency; ++i) load.SubmitOne();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    load.stop.store(true);
    {
      std::unique_lock lock(load.mu);
      load.drained.wait(lock, [&] { return load.outstanding.load() == 0; });
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(load.mu);
    std::printf("| %s | %d | %.1f | %.0f | %.1f | %.1f | %llu |\n", name.c_str(), concurrency, elapsed,
                static_cast<double>(load.latencies_us.size()) / elapsed, Percentile(load.latencies_us, 0.5),
                Percentile(load.latencies_us, 0.99), static_cast<unsigned long long>(load.failures));
    if (load.failures) std::fprintf(stderr, "%s: first error: %s\n", name.c_str(), load.first_error.c_str());
  }
  return 0;
}

}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
