// Server overhead: the HTTP round trip minus the in-process Engine::Submit latency for the same model and input,
// measured in one run with the two interleaved so that both see the same machine.
//
//   weft_overhead_bench [--repository examples/models] [--requests 2000] [--device cpu|none] [--cpu-workers N]
//
// --device cpu (the default, as `weft serve --device auto` without a GPU) runs batches on the CPU device through
// the multiplexer; --device none runs them on the scheduler's instance threads, the engine without a device.
//
// Prints one row per case (mlp over JSON, detector over the binary extension): p50/p99 of Submit, p50/p99 of
// the HTTP round trip over a keep-alive connection, and the p50 difference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/backends.h"
#include "device/cpu/cpu_device.h"
#include "engine/engine.h"
#include "frontend/http/http_server.h"
#include "frontend/http/inference_service.h"
#include "frontend/http/testing/http_test_client.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "repository/repository.h"

namespace weft {
namespace {

std::vector<float> ReadFloats(const std::filesystem::path& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<float> v(count);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(count * sizeof(float)));
  if (!in) {
    std::fprintf(stderr, "cannot read %s (run tools/make_examples.sh)\n", path.c_str());
    std::exit(1);
  }
  return v;
}

struct Case {
  std::string label;
  std::string model;
  std::string input;
  Shape shape;
  std::vector<float> data;
  bool binary;
};

std::string JsonBody(const Case& c) {
  std::ostringstream out;
  out << R"({"inputs":[{"name":")" << c.input << R"(","datatype":"FP32","shape":[)";
  for (size_t i = 0; i < c.shape.size(); ++i) out << (i ? "," : "") << c.shape[i];
  out << R"(],"data":[)";
  char buf[32];
  for (size_t i = 0; i < c.data.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.9g", c.data[i]);
    out << (i ? "," : "") << buf;
  }
  out << "]}]}";
  return out.str();
}

std::pair<std::string, size_t> BinaryBody(const Case& c) {
  std::ostringstream head;
  head << R"({"inputs":[{"name":")" << c.input << R"(","datatype":"FP32","shape":[)";
  for (size_t i = 0; i < c.shape.size(); ++i) head << (i ? "," : "") << c.shape[i];
  head << R"(],"parameters":{"binary_data_size":)" << c.data.size() * 4 << R"(}}],"binary_data_output":true})";
  std::string body = head.str();
  size_t header_length = body.size();
  body.append(reinterpret_cast<const char*>(c.data.data()), c.data.size() * 4);
  return {body, header_length};
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int Main(int argc, char** argv) {
  std::filesystem::path repository = "examples/models";
  int requests = 2000;
  std::string device_name = "cpu";
  int workers = 0;  // as weft serve: one per hardware thread, at least 2
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repository")) repository = argv[i + 1];
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) device_name = argv[i + 1];
    if (!std::strcmp(argv[i], "--cpu-workers")) workers = std::atoi(argv[i + 1]);
  }
  std::filesystem::path reference = repository.parent_path() / "reference";

  BackendRegistry backends;
  RegisterAvailableBackends(&backends);
  auto models = LoadRepository({.root = repository,
                                .parse_config = [](const std::filesystem::path& p) { return ParseModelConfigFile(p); },
                                .backends = &backends});
  if (!models.ok()) {
    std::fprintf(stderr, "%s\n", models.status().ToString().c_str());
    return 1;
  }
  MetricsRegistry metrics;
  // Declared before the engine, which must be destroyed first.
  std::unique_ptr<Device> device;
  Engine::Options options;
  if (device_name == "cpu") {
    if (workers <= 0) workers = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    auto cpu = CreateCpuDevice({.workers = workers});
    if (!cpu.ok()) {
      std::fprintf(stderr, "%s\n", cpu.status().ToString().c_str());
      return 1;
    }
    device = std::move(cpu).value();
    options.device = device.get();
    options.multiplexer.best_effort_budget = std::max(1, workers - 1);  // weft serve's default on the CPU device
  } else if (device_name != "none") {
    std::fprintf(stderr, "--device: expected cpu or none, got '%s'\n", device_name.c_str());
    return 1;
  }
  Engine engine(std::move(models).value(), options, &metrics);
  InferenceService service(&engine, &metrics);
  HttpServer http({.address = "127.0.0.1", .port = 0, .io_threads = 1}, &service);
  if (Status s = http.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }

  std::vector<Case> cases = {
      {"mlp json", "mlp", "INPUT0", {1, 64}, ReadFloats(reference / "mlp" / "input.INPUT0.bin", 64), false},
      {"detector binary",
       "detector",
       "images",
       {1, 3, 224, 224},
       ReadFloats(reference / "detector" / "input.images.bin", 3 * 224 * 224),
       true},
  };
  std::printf("| case | requests | Submit p50 us | Submit p99 us | HTTP p50 us | HTTP p99 us | overhead p50 us |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Case& c : cases) {
    testing::HttpTestClient client(http.port());
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
    if (c.binary) {
      auto [b, len] = BinaryBody(c);
      body = std::move(b);
      headers.emplace_back("Inference-Header-Content-Length", std::to_string(len));
    } else {
      body = JsonBody(c);
    }
    std::string target = "/v2/models/" + c.model + "/infer";
    std::vector<double> submit_us, http_us;
    for (int i = 0; i < requests + requests / 10; ++i) {
      bool record = i >= requests / 10;  // the first tenth warms up caches and allocators
      // In-process: the same tensor the HTTP path would decode, built before the clock starts.
      auto request = std::make_unique<InferenceRequest>();
      request->model_name = c.model;
      std::vector<std::byte> bytes(c.data.size() * 4);
      std::memcpy(bytes.data(), c.data.data(), bytes.size());
      request->inputs.push_back(Tensor::FromBytes(c.input, DataType::kFp32, c.shape, std::move(bytes)));
      std::promise<bool> done;
      auto start = std::chrono::steady_clock::now();
      engine.Submit(std::move(request), [&done](Result<InferenceResponse> r) { done.set_value(r.ok()); });
      bool ok = done.get_future().get();
      double submit = MicrosSince(start);
      start = std::chrono::steady_clock::now();
      auto response = client.Post(target, body, headers);
      double round_trip = MicrosSince(start);
      if (!ok || !response.ok() || response.status != 200) {
        std::fprintf(stderr, "%s: request failed: %s %s\n", c.label.c_str(), response.error.c_str(),
                     response.body.substr(0, 200).c_str());
        return 1;
      }
      if (record) {
        submit_us.push_back(submit);
        http_us.push_back(round_trip);
      }
    }
    double s50 = Percentile(submit_us, 0.5), h50 = Percentile(http_us, 0.5);
    std::printf("| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f |\n", c.label.c_str(), requests, s50,
                Percentile(submit_us, 0.99), h50, Percentile(http_us, 0.99), h50 - s50);
  }
  http.Stop();
  return 0;
}

}  // namespace weft

int main(int argc, char** argv) { return weft::Main(argc, argv); }
