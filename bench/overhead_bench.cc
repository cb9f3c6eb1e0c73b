// Server overhead: the HTTP round trip minus the in-process Engine::Submit latency for the same model and input,
// measured in one run with the two interleaved so that both see the same machine.
//
//   weft_overhead_bench [--repository examples/models] [--requests 2000] [--device cpu|none] [--cpu-workers N]
//                       [--tracing true]
//   weft_overhead_bench --collector-port PORT
//
// --device cpu (the default, as `weft serve --device auto` without a GPU) runs batches on the CPU device through
// the multiplexer; --device none runs them on the scheduler's instance threads, the engine without a device.
//
// Prints one row per case (mlp over JSON, detector over the binary extension): p50/p99 of Submit, p50/p99 of
// the HTTP round trip over a keep-alive connection, and the p50 difference.
//
// --tracing true measures what tracing costs instead (issue 14): the mlp over JSON through three HTTP servers on the
// same engine, one request to each in turn so that all three see the same machine: no tracer (the path a build
// without tracing takes), a tracer with the level OFF, and a tracer tracing every request in OpenTelemetry mode,
// exporting to an in-process collector that answers 200.
//
// --collector-port only runs that collector, on 127.0.0.1:PORT, until it is killed: the cheapest OTLP/HTTP sink for
// bench/tracing_bench.sh, so that the collector on the same machine takes as little as possible from the server.
#include <algorithm>
#include <atomic>
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
#include "trace/tracer.h"

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

// An OTLP/HTTP collector that takes every export and keeps nothing.
class DiscardingCollector final : public HttpHandler {
 public:
  void Handle(HttpRequest request, HttpResponder responder) override {
    exports_.fetch_add(1, std::memory_order_relaxed);
    HttpResponse response;
    response.content_type = "application/x-protobuf";
    responder.Send(std::move(response));
  }
  uint64_t exports() const { return exports_.load(); }

 private:
  std::atomic<uint64_t> exports_{0};
};

int TracingCost(Engine& engine, MetricsRegistry& metrics, const std::filesystem::path& reference, int requests) {
  DiscardingCollector collector;
  HttpServer collector_http({.address = "127.0.0.1", .port = 0, .io_threads = 1}, &collector);
  if (Status s = collector_http.Start(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  TraceSettings off;
  TraceSettings on;
  on.mode = TraceMode::kOpenTelemetry;
  on.timestamps = true;
  on.rate = 1;
  on.otel_url = "http://127.0.0.1:" + std::to_string(collector_http.port()) + "/v1/traces";
  on.bsp_schedule_delay = std::chrono::milliseconds(200);
  Tracer tracer_off(off, &metrics);
  Tracer tracer_on(on, &metrics);
  struct Arm {
    const char* label;
    Tracer* tracer;
    std::unique_ptr<InferenceService> service;
    std::unique_ptr<HttpServer> http;
    std::vector<double> us;
  };
  Arm arms[] = {{"no tracer", nullptr, nullptr, nullptr, {}},
                {"tracer, level OFF", &tracer_off, nullptr, nullptr, {}},
                {"tracer, every request (OTLP)", &tracer_on, nullptr, nullptr, {}}};
  for (Arm& arm : arms) {
    arm.service =
        std::make_unique<InferenceService>(&engine, &metrics, InferenceService::Options{.tracer = arm.tracer});
    arm.http = std::make_unique<HttpServer>(HttpServer::Options{.address = "127.0.0.1", .port = 0, .io_threads = 1},
                                            arm.service.get());
    if (Status s = arm.http->Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  const Case c{"mlp json", "mlp", "INPUT0", {1, 64}, ReadFloats(reference / "mlp" / "input.INPUT0.bin", 64), false};
  const std::string body = JsonBody(c);
  std::vector<std::unique_ptr<testing::HttpTestClient>> clients;
  for (Arm& arm : arms) clients.push_back(std::make_unique<testing::HttpTestClient>(arm.http->port()));
  for (int i = 0; i < requests + requests / 10; ++i) {
    for (size_t a = 0; a < std::size(arms); ++a) {
      // The order turns each round, so that no arm always follows the same one.
      const size_t k = (a + static_cast<size_t>(i)) % std::size(arms);
      const auto start = std::chrono::steady_clock::now();
      auto response = clients[k]->Post("/v2/models/mlp/infer", body, {});
      const double us = MicrosSince(start);
      if (!response.ok() || response.status != 200) {
        std::fprintf(stderr, "%s: request failed: %s\n", arms[k].label, response.error.c_str());
        return 1;
      }
      if (i >= requests / 10) arms[k].us.push_back(us);
    }
  }
  const double base50 = Percentile(arms[0].us, 0.5), base99 = Percentile(arms[0].us, 0.99);
  std::printf("| arm | requests | HTTP p50 us | HTTP p99 us | p50 - no tracer us | p50 ratio | p99 ratio |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (Arm& arm : arms) {
    const double p50 = Percentile(arm.us, 0.5), p99 = Percentile(arm.us, 0.99);
    std::printf("| %s | %d | %.1f | %.1f | %+.1f | %.3f | %.3f |\n", arm.label, requests, p50, p99, p50 - base50,
                p50 / base50, p99 / base99);
  }
  for (Arm& arm : arms) arm.http->Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the last batch of spans
  std::printf("\ncollector: %llu export requests\n", static_cast<unsigned long long>(collector.exports()));
  collector_http.Stop();
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  std::filesystem::path repository = "examples/models";
  int requests = 2000;
  std::string device_name = "cpu";
  int workers = 0;  // as weft serve: one per hardware thread, at least 2
  bool tracing = false;
  int collector_port = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repository")) repository = argv[i + 1];
    if (!std::strcmp(argv[i], "--requests")) requests = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) device_name = argv[i + 1];
    if (!std::strcmp(argv[i], "--cpu-workers")) workers = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--tracing")) tracing = !std::strcmp(argv[i + 1], "true");
    if (!std::strcmp(argv[i], "--collector-port")) collector_port = std::atoi(argv[i + 1]);
  }
  std::filesystem::path reference = repository.parent_path() / "reference";
  if (collector_port >= 0) {
    DiscardingCollector collector;
    HttpServer server({.address = "127.0.0.1", .port = static_cast<uint16_t>(collector_port), .io_threads = 1},
                      &collector);
    if (Status s = server.Start(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    std::printf("collector on 127.0.0.1:%u\n", static_cast<unsigned>(server.port()));
    std::fflush(stdout);
    while (true) std::this_thread::sleep_for(std::chrono::seconds(3600));
  }

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
  if (tracing) return TracingCost(engine, metrics, reference, requests);
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
