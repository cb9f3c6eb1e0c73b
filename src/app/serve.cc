#include "app/serve.h"

#include <signal.h>

#include <chrono>

#include "backends/backends.h"
#include "base/log.h"
#include "engine/engine.h"
#include "frontend/http/http_server.h"
#include "frontend/http/inference_service.h"
#include "frontend/http/metrics_service.h"
#include "metrics/metrics.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "repository/repository.h"

namespace weft {

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

  MetricsRegistry metrics;
  Engine engine(std::move(models).value(),
                {.max_queue_per_model = options.max_queue_per_model, .max_queued_bytes = options.max_queued_bytes},
                &metrics);
  InferenceService inference(&engine, &metrics);
  MetricsService metrics_service(&metrics);

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
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  WEFT_LOG(Info) << "serving HTTP on " << options.http_address << ":" << http.port() << ", metrics on port "
                 << metrics_http.port() << "; ready in " << ms << " ms"
                 << (engine.Ready() ? "" : " (some models are unavailable)");

  int sig = 0;
  sigwait(&stop_signals, &sig);
  WEFT_LOG(Info) << "signal " << sig << ": stopping";
  http.Stop();  // no new requests; in-flight answers are written before the I/O threads end
  metrics_http.Stop();
  return 0;  // the engine answers what is still queued as it is destroyed
}

}  // namespace weft
