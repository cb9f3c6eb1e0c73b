#include "app/serve.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

#include "app/memory_allocator.h"
#include "auth/gatekeeper.h"
#include "auth/tls_files.h"
#include "backends/backends.h"
#include "base/log.h"
#include "device/cuda/cuda_device.h"
#include "engine/engine.h"
#include "frontend/grpc/grpc_server.h"
#include "frontend/http/http_server.h"
#include "frontend/http/inference_service.h"
#include "frontend/http/metrics_service.h"
#include "frontend/shm/shared_memory.h"
#include "lifecycle/live_repository.h"
#include "metrics/gpu_metrics.h"
#include "metrics/metrics.h"
#include "metrics/metrics_config.h"
#include "repository/pbtxt/config_pbtxt.h"
#include "trace/trace_settings.h"
#include "trace/tracer.h"

namespace weft {
namespace {

// --device and --cpu-workers: auto picks CUDA when a GPU is found and logs why not otherwise.
Result<std::unique_ptr<Device>> OpenServeDevice(const ServeOptions& options) {
  WEFT_ASSIGN_OR_RETURN(DeviceChoice choice, ParseDeviceChoice(options.device));
  int workers = options.cpu_workers;
  if (workers <= 0) workers = std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
  return OpenDevice({.choice = choice, .cpu_workers = workers, .poll_high_completions = options.poll_high_completions});
}

// The --auth-* and --rate-limit flags.
Result<GatekeeperOptions> GatekeeperOptionsFor(const ServeOptions& options) {
  GatekeeperOptions g;
  g.keys_file = options.auth_keys;
  g.jwks_file = options.auth_jwks;
  g.jwt.issuer = options.auth_jwt_issuer;
  g.jwt.audience = options.auth_jwt_audience;
  if (options.auth_jwt_clock_skew_secs < 0) return InvalidArgument("--auth-jwt-clock-skew-secs must be >= 0");
  g.jwt.clock_skew = std::chrono::seconds(options.auth_jwt_clock_skew_secs);
  g.protect_health = options.auth_protect_health;
  if (g.protect_health && g.keys_file.empty() && g.jwks_file.empty()) {
    return InvalidArgument("--auth-protect-health needs --auth-keys or --auth-jwks");
  }
  if ((!g.jwt.issuer.empty() || !g.jwt.audience.empty()) && g.jwks_file.empty()) {
    return InvalidArgument("--auth-jwt-issuer and --auth-jwt-audience need --auth-jwks");
  }
  if (!options.rate_limit.empty()) {
    Result<RateLimit> limit = ParseRateLimit(options.rate_limit);
    if (!limit.ok()) return InvalidArgument("--rate-limit: " + limit.status().message());
    g.default_limit = *limit;
  }
  return g;
}

// The --tls-* flags.
Result<TlsFiles> TlsFilesFor(const ServeOptions& options) {
  TlsFiles tls{.cert_file = options.tls_cert,
               .key_file = options.tls_key,
               .client_ca_file = options.tls_client_ca,
               .require_client_cert = options.tls_client_auth == "required"};
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key go together");
  }
  if (!options.tls_client_ca.empty() && options.tls_cert.empty()) {
    return InvalidArgument("--tls-client-ca needs --tls-cert and --tls-key");
  }
  if (options.tls_client_auth != "required" && options.tls_client_auth != "optional") {
    return InvalidArgument("--tls-client-auth must be required or optional, got '" + options.tls_client_auth + "'");
  }
  return tls;
}

bool IsLoopback(const std::string& address) {
  return address == "127.0.0.1" || address == "::1" || address == "localhost" || address.starts_with("127.");
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

// Past the exit timeout, how long the shutdown may still take (the HTTP servers' last error answers being
// written) before the process exits without waiting.
constexpr auto kExitSlack = HttpServer::kFinalAnswerGrace + std::chrono::seconds(1);
// How often the main thread looks whether the shutdown has finished while it waits for a second signal.
constexpr auto kShutdownPoll = std::chrono::milliseconds(20);

// Raises the soft limit on open descriptors to the hard one: every connection takes a descriptor, and a soft
// limit of 1024 (a common default) is reached by a thousand idle clients. Returns the limit in effect; logs once.
rlim_t RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    WEFT_LOG(Warning) << "cannot read the descriptor limit (RLIMIT_NOFILE); assuming 1024";
    return 1024;
  }
  const rlim_t before = limit.rlim_cur;
  rlim_t target = limit.rlim_max;
  if (target == RLIM_INFINITY) {
    // Linux refuses an infinite descriptor limit; fs.nr_open is the most it takes.
    rlim_t nr_open = 1 << 20;
    std::ifstream("/proc/sys/fs/nr_open") >> nr_open;
    target = nr_open;
  }
  if (target > before) {
    limit.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      WEFT_LOG(Info) << "descriptor limit (RLIMIT_NOFILE) raised from " << before << " to " << target;
      return target;
    }
    WEFT_LOG(Warning) << "cannot raise the descriptor limit from " << before << " to " << target << ": "
                      << std::strerror(errno);
    return before;
  }
  WEFT_LOG(Info) << "descriptor limit (RLIMIT_NOFILE): " << before << " (the hard limit)";
  return before;
}

// --max-connections 0: the descriptor limit less what the rest of the process needs (gRPC's connections, the
// metrics port, the device's eventfds, model files): a quarter of the limit, at most 256.
size_t DerivedConnectionLimit(rlim_t descriptors) {
  size_t limit = static_cast<size_t>(std::min<rlim_t>(descriptors, rlim_t{1} << 40));
  return std::max<size_t>(1, limit - std::min<size_t>(256, limit / 4));
}

// Waits for a stop signal until `until`; returns it, or 0 once `until` has passed or `done` is set.
int WaitForSignal(const sigset_t& signals, SteadyTime until, const std::atomic<bool>* done = nullptr) {
  for (;;) {
    if (done && done->load()) return 0;
    auto left = until - std::chrono::steady_clock::now();
    if (left <= SteadyTime::duration::zero()) return 0;
    if (done) left = std::min<SteadyTime::duration>(left, kShutdownPoll);
    auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec wait{.tv_sec = static_cast<time_t>(ns / 1'000'000'000), .tv_nsec = static_cast<long>(ns % 1'000'000'000)};
    int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig > 0) return sig;
  }
}

// Exits without running destructors: the engine's would wait for executions that may never return. Safe here:
// the kernel closes the sockets (what was written is still delivered) and frees memory, mappings and the GPU's
// memory; weft writes no file that needs a destructor, and stderr is flushed first.
[[noreturn]] void ExitNow(int code) {
  std::fflush(nullptr);
  ::_exit(code);
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
  const std::unique_ptr<IdleMemoryPurge> memory_purge = IdleMemoryPurge::Start();
  const rlim_t descriptors = RaiseDescriptorLimit();
  const size_t max_connections =
      options.max_connections > 0 ? options.max_connections : DerivedConnectionLimit(descriptors);
  const auto exit_timeout = std::chrono::seconds(std::max(0, options.exit_timeout_secs));
  const auto drain_delay =
      std::min<std::chrono::seconds>(std::chrono::seconds(std::max(0, options.drain_delay_secs)), exit_timeout);
  if (options.drain_delay_secs > options.exit_timeout_secs) {
    WEFT_LOG(Warning) << "--drain-delay-secs " << options.drain_delay_secs << " is longer than --exit-timeout-secs "
                      << options.exit_timeout_secs << ": the drain delay is cut to the exit timeout";
  }

  BackendRegistry backends;
  RegisterAvailableBackends(&backends);
  std::string names;
  for (const auto& n : backends.Names()) names += (names.empty() ? "" : ", ") + n;
  WEFT_LOG(Info) << "backends: " << names;

  Result<ModelControlMode> mode = ParseModelControlMode(options.model_control_mode);
  if (!mode.ok()) {
    WEFT_LOG(Error) << "--model-control-mode: " << mode.status().message();
    return 1;
  }
  Result<std::optional<Summary::Options>> latency_summaries = ParseMetricsConfig(options.metrics_config);
  if (!latency_summaries.ok()) {
    WEFT_LOG(Error) << latency_summaries.status().message();
    return 1;
  }

  Result<TraceSettings> trace_settings = ParseTraceConfig(options.trace_config);
  if (!trace_settings.ok()) {
    WEFT_LOG(Error) << "--trace-config: " << trace_settings.status().message();
    return 1;
  }

  Result<GatekeeperOptions> gatekeeper_options = GatekeeperOptionsFor(options);
  if (!gatekeeper_options.ok()) {
    WEFT_LOG(Error) << gatekeeper_options.status().message();
    return 1;
  }
  Result<TlsFiles> tls = TlsFilesFor(options);
  if (!tls.ok()) {
    WEFT_LOG(Error) << tls.status().message();
    return 1;
  }

  auto device = OpenServeDevice(options);
  if (!device.ok()) {
    WEFT_LOG(Error) << "cannot open the device: " << device.status().message();
    return 1;
  }
  WEFT_LOG(Info) << "device: " << (*device)->Describe();
  MetricsRegistry metrics;  // the device outlives the engine: declared before it
  metrics.SetLatencySummaries(*latency_summaries);
  std::unique_ptr<GpuMetricsPoller> gpu_metrics;  // reads into `metrics`, so declared after it
  if (options.triton_metrics && options.allow_gpu_metrics) {
    Result<std::unique_ptr<GpuSource>> nvml = OpenNvml();
    if (nvml.ok()) {
      gpu_metrics = std::make_unique<GpuMetricsPoller>(std::move(nvml).value(), &metrics,
                                                       std::chrono::milliseconds(options.metrics_interval_ms));
      WEFT_LOG(Info) << "GPU metrics (nv_gpu_*) from NVML every " << options.metrics_interval_ms << " ms";
    } else {
      WEFT_LOG(Info) << "no GPU metrics: " << nvml.status().message();
    }
  }
  // Outlives the engine and the frontends (the requests' traces hold its core, not it).
  Tracer tracer(*trace_settings, &metrics);
  // Outlives the frontends, which ask it about every request.
  Result<std::unique_ptr<Gatekeeper>> gatekeeper = Gatekeeper::Create(*std::move(gatekeeper_options), &metrics);
  if (!gatekeeper.ok()) {
    WEFT_LOG(Error) << "authentication: " << gatekeeper.status().message();
    return 1;
  }
  // Destroyed by the shutdown thread, which the main thread does not wait for past the exit timeout.
  auto engine = std::make_unique<Engine>(Engine::Options{.max_queue_per_model = options.max_queue_per_model,
                                                         .max_queued_bytes = options.max_queued_bytes,
                                                         .device = device->get(),
                                                         .multiplexer = MultiplexerOptionsFor(options, **device),
                                                         .strict_readiness = options.strict_readiness},
                                         &metrics);
  // Destroyed before the engine (by the shutdown thread): it holds versions that the engine tears down.
  auto repository = std::make_unique<LiveRepository>(
      engine.get(), &metrics,
      LiveRepositoryOptions{
          .root = options.model_repository,
          .mode = *mode,
          .poll_interval = std::chrono::milliseconds(static_cast<int64_t>(options.repository_poll_secs) * 1000),
          .settle = std::chrono::milliseconds(static_cast<int64_t>(options.repository_settle_secs * 1000)),
          .startup_models = options.load_models,
          .require_checksums = options.require_checksums,
          .load_threads = options.model_load_threads,
          .parse_config = [](std::string_view text, const std::string& source,
                             const std::string&) { return ParseModelConfigText(text, source); },
          .parse_config_json = [](std::string_view text, const std::string& source,
                                  const std::string& name) { return ParseModelConfigJson(text, source, name); },
          .backends = &backends});
  if (Status s = repository->Start(); !s.ok()) {
    WEFT_LOG(Error) << "cannot load the model repository: " << s.message();
    return 1;
  }
  // Null when the extension is off. A request's shared memory tensors keep their mappings alive, so the registry
  // may go before the engine.
  std::unique_ptr<SharedMemoryRegistry> shared_memory;
  if (options.allow_shared_memory) {
    shared_memory = std::make_unique<SharedMemoryRegistry>(
        SharedMemoryRegistry::Options{.max_regions = options.max_shared_memory_regions,
                                      .key_prefix = options.shared_memory_prefix,
                                      .allowed_owner_uids = options.shared_memory_owner_uids});
  }
  InferenceService inference(engine.get(), &metrics,
                             {.shared_memory = shared_memory.get(),
                              .repository = repository.get(),
                              .max_inflated_body_bytes = options.max_request_body_bytes,
                              .tracer = &tracer,
                              .gatekeeper = gatekeeper->get()});
  MetricsService metrics_service(&metrics,
                                 {.triton_families = options.triton_metrics, .gatekeeper = gatekeeper->get()});
  GrpcServer grpc({.address = options.http_address,
                   .port = options.grpc_port,
                   .max_message_bytes = static_cast<int64_t>(options.max_request_body_bytes),
                   .tracer = &tracer,
                   .gatekeeper = gatekeeper->get(),
                   .tls = *tls},
                  engine.get(), &metrics, shared_memory.get(), repository.get());

  HttpServer http({.address = options.http_address,
                   .port = options.http_port,
                   .io_threads = options.http_threads,
                   .max_body_bytes = options.max_request_body_bytes,
                   .max_connections = max_connections,
                   .max_unsent_response_bytes = options.max_unsent_response_bytes,
                   .tls = *tls},
                  &inference);
  // Scrapes are few and small: a fixed limit keeps the descriptors for the inference port.
  HttpServer metrics_http({.address = options.http_address,
                           .port = options.metrics_port,
                           .io_threads = 1,
                           .max_connections = 64,
                           .tls = *tls},
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
                 << (engine->Ready() ? "" : " (some models are unavailable)")
                 << (!shared_memory                          ? ""
                     : SharedMemoryRegistry::CudaAvailable() ? "; system and CUDA shared memory are on"
                                                             : "; system shared memory is on (CUDA: no GPU)")
                 << "; at most " << max_connections << " HTTP connections" << (tls->enabled() ? "; TLS" : "")
                 << ((*gatekeeper)->authenticates() ? "; authentication on" : "") << "; memory from "
                 << MemoryAllocatorName();
  if (!(*gatekeeper)->authenticates() && !IsLoopback(options.http_address)) {
    WEFT_LOG(Warning) << "authentication is off and the ports listen on " << options.http_address
                      << ": anyone who reaches them may infer, load and unload models (--auth-keys, --auth-jwks; "
                         "docs/security.md)";
  }

  // The shutdown, as Kubernetes expects it: readiness false at once, the drain delay while load balancers take
  // the server out, then no new connections and the requests on the wire answered, all within the exit timeout.
  // The main thread keeps watching for a second signal (exit at once) and for the exit timeout (exit even if an
  // execution never returns); the shutdown thread does the waiting on the frontends and the engine.
  int sig = 0;
  sigwait(&stop_signals, &sig);
  const SteadyTime signalled = std::chrono::steady_clock::now();
  const SteadyTime deadline = signalled + exit_timeout;
  WEFT_LOG(Info) << "signal " << sig << ": readiness is false; "
                 << (drain_delay.count() > 0 ? "serving " + std::to_string(drain_delay.count()) + " s more, then " : "")
                 << "answering the requests on the wire, for at most " << exit_timeout.count()
                 << " s in all (a second signal exits at once)";
  inference.BeginDraining();
  grpc.BeginDraining();
  repository->BeginShutdown();  // answers the API loads waiting, so that no call waits on a load
  if (int again = WaitForSignal(stop_signals, signalled + drain_delay); again != 0) {
    WEFT_LOG(Warning) << "signal " << again << " again: exiting at once";
    ExitNow(128 + again);
  }
  if (drain_delay.count() > 0) {
    WEFT_LOG(Info) << "no new connections; answering the requests on the wire";
  }
  std::atomic<bool> done{false};
  std::jthread stopper([&] {
    http.BeginShutdown(deadline);
    metrics_http.BeginShutdown(deadline);
    grpc.Stop(deadline);  // returns once every call is done, so it waits on executions that never return
    http.Stop();
    metrics_http.Stop();
    repository.reset();  // waits for a load under way; what serves stays published until the engine goes
    engine.reset();      // answers what is still queued; waits for executions in flight
    done = true;
  });
  if (int again = WaitForSignal(stop_signals, deadline + kExitSlack, &done); again != 0) {
    WEFT_LOG(Warning) << "signal " << again << " again: exiting at once";
    ExitNow(128 + again);
  }
  if (!done) {
    WEFT_LOG(Error) << "the exit timeout (" << exit_timeout.count()
                    << " s) has passed with work still running (an execution that does not return?): exiting "
                       "without waiting for it";
    ExitNow(1);
  }
  stopper.join();
  WEFT_LOG(Info) << "stopped";
  return 0;
}

}  // namespace weft
