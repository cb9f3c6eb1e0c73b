#include "app/serve.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "backends/backends.h"
#include "base/log.h"
#include "device/cuda/cuda_device.h"
#include "engine/engine.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_server.h"
#include "frontend/http/inference_service.h"
#include "frontend/http/metrics_service.h"
#include "frontend/shm/shared_memory.h"
#include "metrics/metrics.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "repository/repository.h"

namespace weft {
namespace {

// --device and --cpu-workers: auto picks CUDA when a GPU is found and logs why not otherwise.
Result<std::unique_ptr<Device>> OpenServeDevice(const ServeOptions& options) {
  WEFT_ASSIGN_OR_RETURN(DeviceChoice choice, ParseDeviceChoice(options.device));
  int workers = options.cpu_workers;
  if (workers <= 0) workers = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  return OpenDevice({.choice = choice, .cpu_workers = workers, .poll_high_completions = options.poll_high_completions});
}

MultiplexerOptions MultiplexerOptionsFor(const ServeOptions& options, const Device& device) {
  MultiplexerOptions m;
  m.streams_per_class = options.streams_per_class;
  m.stream_priorities = options.stream_priorities;
  m.load_balance = options.load_balance;
  m.best_effort_max_inflight = options.best_effort_inflight;
  m.best_effort_budget = options.best_effort_budget;
  if (m.best_effort_budget < 0) {
    // On the CPU device a batch holds a worker until it ends: leave one for urgent work.
    const int workers = options.cpu_workers > 0 ? options.cpu_workers
                                                : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    m.best_effort_budget = device.kind() == DeviceKind::kCpu ? std::max(1, workers - 1) : 0;
  }
  return m;
}

}  // namespace

int RunServe(const ServeOptions& options) {
  auto start = std::chrono::steady_clock::now();
  // Block the stop signals before any thread starts, so that every thread inherits the mask and only sigwait
  // below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  BackendRegistry backends;
  RegisterAvailableBackends(&backends);
  std::string names;
  for (const auto& n : backends.Names()) names += (names.empty() ? "" : ", ") + n;
  WEFT_LOG(Info) << "backends: " << names;

  auto models = LoadRepository({.root = options.model_repository,
                                .parse_config = [](const std::filesystem::path& p) { return ParseModelConfigFile(p); },
                                .backends = &backends});
  if (!models.ok()) {
    WEFT_LOG(Error) << "cannot load the model repository: " << models.status().message();
    return 1;
  }
  for (const auto& m : *models) {
    if (!m.status.ok()) {
      WEFT_LOG(Warning) << "model '" << m.name << "' is unavailable: " << m.status.message();
    }
  }

  auto device = OpenServeDevice(options);
  if (!device.ok()) {
    WEFT_LOG(Error) << "cannot open the device: " << device.status().message();
    return 1;
  }
  WEFT_LOG(Info) << "device: " << (*device)->Describe();
  MetricsRegistry metrics;  // the device outlives the engine: declared before it
  Engine engine(std::move(models).value(),
                {.max_queue_per_model = options.max_queue_per_model,
                 .max_queued_bytes = options.max_queued_bytes,
                 .device = device->get(),
                 .multiplexer = MultiplexerOptionsFor(options, **device)},
                &metrics);
  // Null when the extension is off. A request's shared memory tensors keep their mappings alive, so the registry
  // may go before the engine.
  std::unique_ptr<SharedMemoryRegistry> shared_memory;
  if (options.allow_shared_memory) shared_memory = std::make_unique<SharedMemoryRegistry>();
  InferenceService inference(&engine, &metrics, {.shared_memory = shared_memory.get()});
  MetricsService metrics_service(&metrics);
  GrpcServer grpc({.address = options.http_address,
                   .port = options.grpc_port,
                   .max_message_bytes = static_cast<int64_t>(options.max_request_body_bytes)},
                  &engine, &metrics, shared_memory.get());

  HttpServer http({.address = options.http_address,
                   .port = options.http_port,
                   .io_threads = options.http_threads,
                   .max_body_bytes = options.max_request_body_bytes},
                  &inference);
  HttpServer metrics_http({.address = options.http_address, .port = options.metrics_port, .io_threads = 1},
                          &metrics_service);
  if (Status s = http.Start(); !s.ok()) {
    WEFT_LOG(Error) << "HTTP server: " << s.message();
    return 1;
  }
  if (Status s = metrics_http.Start(); !s.ok()) {
    WEFT_LOG(Error) << "metrics server: " << s.message();
    return 1;
  }
  if (Status s = grpc.Start(); !s.ok()) {
    WEFT_LOG(Error) << "gRPC server: " << s.message();
    return 1;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  WEFT_LOG(Info) << "serving HTTP on " << options.http_address << ":" << http.port() << ", gRPC on port " << grpc.port()
                 << ", metrics on port " << metrics_http.port() << "; ready in " << ms << " ms"
                 << (engine.Ready() ? "" : " (some models are unavailable)")
                 << (shared_memory ? "; system shared memory is on" : "");

  int sig = 0;
  sigwait(&stop_signals, &sig);
  WEFT_LOG(Info) << "signal " << sig << ": stopping";
  http.Stop();  // no new requests; in-flight answers are written before the I/O threads end
  grpc.Stop();  // the same for gRPC calls; streams still open after its drain timeout are cancelled
  metrics_http.Stop();
  return 0;  // the engine answers what is still queued as it is destroyed
}

}  // namespace weft
