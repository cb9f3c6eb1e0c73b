// A runtime's raw in-process throughput through weft's own backend, without a server: the ceiling that served
// throughput is compared with (docs/benchmarks.md, issue 15). For each thread count, instance count and batch size,
// every instance runs on its own thread, calling Execute on a batch of zeros in a loop for `seconds`; the figure is
// the items all of them finished per second. Rounds repeat the whole table, so that warm-up shows.
//
//   weft_runtime_bench --model-dir DIR [--batches 1,8] [--instances 1,2] [--threads 1,2] [--seconds 3] [--rounds 2]
//
// DIR holds config.pbtxt and version 1. Threads: TorchScript's `intra_op_threads`; OpenCV DNN's process-wide pool
// (cv::setNumThreads). The config's own parameters apply otherwise (weft.optimize_for_inference, for example).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "backends/backends.h"
#include "repository/pbtxt/config_pbtxt.h"

#ifdef WEFT_BENCH_OPENCV
#include <opencv2/core/utility.hpp>
#endif

namespace weft {
namespace {

std::vector<int> ParseList(const char* text) {
  std::vector<int> values;
  for (const char* p = text; *p != '\0';) {
    values.push_back(std::atoi(p));
    const char* comma = std::strchr(p, ',');
    if (comma == nullptr) break;
    p = comma + 1;
  }
  return values;
}

std::vector<Tensor> ZeroBatch(const ModelConfig& config, int batch) {
  std::vector<Tensor> inputs;
  for (const TensorConfig& in : config.inputs) {
    Shape shape = FullShape(config, in);
    for (auto& d : shape) d = d < 0 ? 1 : d;
    if (config.max_batch_size > 0) shape[0] = batch;
    std::byte* data;
    inputs.push_back(Tensor::Allocate(in.name, in.data_type, shape, &data));
  }
  return inputs;
}

// Items per second of `instances`, each on its own thread, for `seconds`.
Result<double> Measure(std::vector<std::unique_ptr<ModelInstance>>& instances, const ModelConfig& config, int batch,
                       double seconds) {
  const std::vector<Tensor> inputs = ZeroBatch(config, batch);
  for (auto& instance : instances) {
    for (int i = 0; i < 3; ++i) WEFT_RETURN_IF_ERROR(instance->Execute(inputs).status());
  }
  std::atomic<int64_t> items{0};
  std::atomic<bool> failed{false};
  const auto start = std::chrono::steady_clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  {
    std::vector<std::jthread> threads;
    for (auto& instance : instances) {
      threads.emplace_back([&, model = instance.get()] {
        while (std::chrono::steady_clock::now() < end) {
          if (!model->Execute(inputs).ok()) {
            failed = true;
            return;
          }
          items += batch;
        }
      });
    }
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (failed) return Internal("an execution failed");
  return static_cast<double>(items) / took;
}

int Run(int argc, char** argv) {
  std::string dir;
  std::vector<int> batches = {1, 8}, instance_counts = {1, 2}, thread_counts = {1, 2};
  double seconds = 3;
  int rounds = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model-dir")
      dir = argv[i + 1];
    else if (flag == "--batches")
      batches = ParseList(argv[i + 1]);
    else if (flag == "--instances")
      instance_counts = ParseList(argv[i + 1]);
    else if (flag == "--threads")
      thread_counts = ParseList(argv[i + 1]);
    else if (flag == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (flag == "--rounds")
      rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr,
                 "usage: weft_runtime_bench --model-dir DIR [--batches 1,8] [--instances 1,2] "
                 "[--threads 1,2] [--seconds 3] [--rounds 2]\n");
    return 2;
  }
  Result<ModelConfig> parsed = ParseModelConfigFile(std::filesystem::path(dir) / "config.pbtxt");
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s\n", parsed.status().ToString().c_str());
    return 1;
  }
  BackendRegistry registry;
  RegisterAvailableBackends(&registry);
  Result<std::shared_ptr<const Backend>> backend = registry.Find(*parsed);
  if (!backend.ok()) {
    std::fprintf(stderr, "%s\n", backend.status().ToString().c_str());
    return 1;
  }
  std::printf("%5s %7s %9s %5s %10s\n", "round", "threads", "instances", "batch", "items/s");
  for (int round = 0; round < rounds; ++round) {
    for (int threads : thread_counts) {
      ModelConfig config = *parsed;
      config.parameters["intra_op_threads"] = std::to_string(threads);
#ifdef WEFT_BENCH_OPENCV
      cv::setNumThreads(threads);
#endif
      for (int count : instance_counts) {
        std::vector<std::unique_ptr<ModelInstance>> instances;
        for (int i = 0; i < count; ++i) {
          Result<std::unique_ptr<ModelInstance>> instance =
              (*backend)->CreateInstance(config, std::filesystem::path(dir) / "1", i);
          if (!instance.ok()) {
            std::fprintf(stderr, "%s\n", instance.status().ToString().c_str());
            return 1;
          }
          instances.push_back(std::move(*instance));
        }
        for (int batch : batches) {
          Result<double> rate = Measure(instances, config, batch, seconds);
          if (!rate.ok()) {
            std::fprintf(stderr, "%s\n", rate.status().ToString().c_str());
            return 1;
          }
          std::printf("%5d %7d %9d %5d %10.1f\n", round, threads, count, batch, *rate);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) { return weft::Run(argc, argv); }
