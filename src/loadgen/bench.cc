#include "loadgen/bench.h"

#include <openssl/evp.h>
#include <sys/resource.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "loadgen/client_shared_memory.h"
#include "loadgen/grpc_transport.h"
#include "loadgen/http_transport.h"
#include "loadgen/input_generator.h"
#include "loadgen/json_text.h"
#include "loadgen/load_worker.h"
#include "loadgen/model_metadata.h"

namespace weft {

namespace {

using Seconds = std::chrono::duration<double>;

// Metadata requests and the reachability probe: short, so that a wrong URL fails fast.
constexpr std::chrono::seconds kSetupTimeout{10};
// Open loop: how far ahead of "now" the schedule starts, so that every io thread is running by the first arrival.
constexpr std::chrono::milliseconds kOpenLoopLead{5};

std::chrono::nanoseconds ToNanos(Seconds s) { return std::chrono::duration_cast<std::chrono::nanoseconds>(s); }

Status ReplyError(const TransportReply& reply, const HttpUrl& url, const std::string& what) {
  if (reply.failure != TransportReply::Failure::kNone) {
    return Unavailable("cannot reach the server at " + url.ToString() + " (" + what + "): " + reply.error);
  }
  std::string detail = "GET " + what + " answered HTTP " + std::to_string(reply.status) + ": " + reply.body;
  return reply.status == 404 ? NotFound(detail) : InvalidArgument(detail);
}

// What a run sends, and the shared memory it set up (unregistered by `cleanup` after the run).
struct PreparedRun {
  PreparedRequest request;
  std::optional<SharedMemoryRun> shared_memory;
  std::function<void()> cleanup;
};

InferRequestOptions RequestOptions(const BenchOptions& options, const std::optional<SharedMemoryRun>& shm) {
  InferRequestOptions out{.binary = options.binary,
                          .priority = options.priority,
                          .timeout_us = options.timeout_us,
                          .parameters = options.parameters};
  if (shm) {
    out.shared_memory_inputs = shm->input_placements;
    out.shared_memory_outputs = shm->output_placements;
  }
  return out;
}

Result<SharedMemoryRun> MakeSharedMemory(const BenchOptions& options, const ModelMetadata& metadata,
                                         const std::vector<GeneratedInput>& inputs,
                                         const InputGenerationOptions& generation) {
  bool batches = generation.max_batch_size ? *generation.max_batch_size > 0
                                           : std::all_of(metadata.inputs.begin(), metadata.inputs.end(),
                                                         [](auto& t) { return !t.shape.empty() && t.shape[0] == -1; });
  return CreateSharedMemoryRun(inputs, metadata, batches, options.batch_size, options.output_shared_memory_size,
                               options.shared_memory);
}

// Standard base64 with padding, as the CUDA registration body carries the handle (OpenSSL's encoder).
std::string Base64(std::span<const std::byte> bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

// The body of POST v2/{system|cuda}sharedmemory/region/{r}/register for one of the run's two regions.
std::string RegistrationBody(const SharedMemoryRun& shm, bool inputs) {
  if (shm.cuda_inputs) {
    const CudaSharedBuffer& buffer = inputs ? *shm.cuda_inputs : *shm.cuda_outputs;
    return "{\"raw_handle\":{\"b64\":\"" + Base64(buffer.handle()) +
           "\"},\"device_id\":" + std::to_string(buffer.device_id()) +
           ",\"byte_size\":" + std::to_string(buffer.byte_size()) + "}";
  }
  const ClientSharedMemory& object = inputs ? *shm.inputs : *shm.outputs;
  std::string body = "{\"key\":";
  AppendJsonString(&body, object.key());
  return body + ",\"offset\":0,\"byte_size\":" + std::to_string(object.byte_size()) + "}";
}

Result<PreparedRun> PrepareRequest(const BenchOptions& options, const HttpUrl& url, const Transport& transport) {
  std::string model_path = ModelPath(url.base_path, options.model, options.model_version);
  auto timeout = std::min<std::chrono::nanoseconds>(kSetupTimeout, ToNanos(options.request_timeout));
  auto get = [&](std::string target) {
    PreparedRequest request;
    request.method = "GET";
    request.target = std::move(target);
    return ExchangeOnce(transport, request, timeout);
  };

  if (!options.input_data_path.empty()) {
    std::ifstream file(options.input_data_path, std::ios::binary);
    if (!file) return InvalidArgument("cannot read --input-data " + options.input_data_path);
    std::ostringstream text;
    text << file.rdbuf();
    Result<PreparedRequest> request = RawInferRequest(model_path, std::move(text).str());
    if (!request.ok()) return request.status().WithContext(options.input_data_path);
    // Any answer will do: the model is not looked up, as a file aimed at a missing model is a valid test.
    TransportReply live = get(url.base_path + "/v2/health/live");
    if (live.failure != TransportReply::Failure::kNone) return ReplyError(live, url, "/v2/health/live");
    return PreparedRun{.request = std::move(request).value()};
  }

  TransportReply metadata_reply = get(model_path);
  if (metadata_reply.failure != TransportReply::Failure::kNone || metadata_reply.status != 200) {
    return ReplyError(metadata_reply, url, model_path);
  }
  Result<ModelMetadata> metadata = ParseModelMetadata(metadata_reply.body);
  if (!metadata.ok()) return metadata.status().WithContext("GET " + model_path);
  if (metadata->name.empty()) metadata->name = options.model;

  InputGenerationOptions generation{.batch_size = options.batch_size,
                                    .shapes = options.shapes,
                                    .string_length = options.string_length,
                                    .seed = options.seed};
  // The configuration tells a batch dim from another variable dim; a server without the model_configuration
  // extension leaves the metadata's leading -1 to say it.
  TransportReply config_reply = get(model_path + "/config");
  if (config_reply.failure == TransportReply::Failure::kNone && config_reply.status == 200) {
    Result<int64_t> max_batch_size = ParseMaxBatchSize(config_reply.body);
    if (max_batch_size.ok()) generation.max_batch_size = *max_batch_size;
  }
  WEFT_ASSIGN_OR_RETURN(std::vector<GeneratedInput> inputs, GenerateInputs(*metadata, generation));
  PreparedRun run;
  if (options.shared_memory != SharedMemoryMode::kNone) {
    WEFT_ASSIGN_OR_RETURN(run.shared_memory, MakeSharedMemory(options, *metadata, inputs, generation));
    const bool cuda = options.shared_memory == SharedMemoryMode::kCuda;
    std::string shm_path = url.base_path + (cuda ? "/v2/cudasharedmemory" : "/v2/systemsharedmemory");
    const SharedMemoryRun& shm = *run.shared_memory;
    // Set first, so that a failed second registration still unregisters the first.
    run.cleanup = [&transport, timeout, shm_path,
                   regions = std::vector<std::string>{shm.input_region, shm.output_region}] {
      for (const std::string& name : regions) {
        PreparedRequest unregister;
        unregister.target = shm_path + "/region/" + name + "/unregister";
        ExchangeOnce(transport, unregister, timeout);
      }
    };
    for (const auto& [name, inputs_region] : {std::pair(shm.input_region, true), std::pair(shm.output_region, false)}) {
      PreparedRequest registration;
      registration.target = shm_path + "/region/" + name + "/register";
      registration.headers.emplace_back("Content-Type", "application/json");
      registration.body = RegistrationBody(shm, inputs_region);
      TransportReply reply = ExchangeOnce(transport, registration, timeout);
      if (reply.failure == TransportReply::Failure::kNone && reply.status == 200) continue;
      run.cleanup();
      if (reply.failure == TransportReply::Failure::kNone && reply.status == 501) {
        return Unimplemented(std::string("the server does not offer ") + (cuda ? "CUDA" : "system") +
                             " shared memory (weft serve --allow-shared-memory, and a GPU for CUDA): " + reply.body);
      }
      return ReplyError(reply, url, registration.target);
    }
  }
  run.request = BuildInferRequest(model_path, inputs, RequestOptions(options, run.shared_memory));
  return run;
}

Result<PreparedRun> PrepareGrpcRequest(const BenchOptions& options, const GrpcTransport& transport) {
  auto timeout = std::min<std::chrono::nanoseconds>(kSetupTimeout, ToNanos(options.request_timeout));
  WEFT_ASSIGN_OR_RETURN(ModelMetadata metadata, transport.FetchMetadata(options.model, options.model_version, timeout));
  if (metadata.name.empty()) metadata.name = options.model;
  InputGenerationOptions generation{.batch_size = options.batch_size,
                                    .shapes = options.shapes,
                                    .string_length = options.string_length,
                                    .seed = options.seed};
  Result<int64_t> max_batch_size = transport.FetchMaxBatchSize(options.model, options.model_version, timeout);
  if (max_batch_size.ok()) generation.max_batch_size = *max_batch_size;
  WEFT_ASSIGN_OR_RETURN(std::vector<GeneratedInput> inputs, GenerateInputs(metadata, generation));
  PreparedRun run;
  if (options.shared_memory != SharedMemoryMode::kNone) {
    WEFT_ASSIGN_OR_RETURN(run.shared_memory, MakeSharedMemory(options, metadata, inputs, generation));
    const SharedMemoryRun& shm = *run.shared_memory;
    const bool cuda = options.shared_memory == SharedMemoryMode::kCuda;
    run.cleanup = [&transport, timeout, cuda, in = shm.input_region, out = shm.output_region] {
      for (const std::string& region : {in, out}) {
        (void)(cuda ? transport.UnregisterCudaSharedMemory(region, timeout)
                    : transport.UnregisterSharedMemory(region, timeout));
      }
    };
    auto register_region = [&](const std::string& region, bool inputs_region) {
      if (cuda) {
        const CudaSharedBuffer& buffer = inputs_region ? *shm.cuda_inputs : *shm.cuda_outputs;
        return transport.RegisterCudaSharedMemory(region, buffer.handle(), buffer.device_id(), buffer.byte_size(),
                                                  timeout);
      }
      const ClientSharedMemory& object = inputs_region ? *shm.inputs : *shm.outputs;
      return transport.RegisterSharedMemory(region, object.key(), object.byte_size(), timeout);
    };
    Status registered = register_region(shm.input_region, true);
    if (registered.ok()) registered = register_region(shm.output_region, false);
    if (!registered.ok()) {
      run.cleanup();
      return registered;
    }
  }
  run.request =
      BuildGrpcInferRequest(options.model, options.model_version, inputs, RequestOptions(options, run.shared_memory));
  return run;
}

// Splits `total` over `parts` as evenly as possible; part i gets the remainder's extra one first.
int Share(int total, int parts, int i) { return total / parts + (i < total % parts ? 1 : 0); }

std::vector<WorkerPlan> PlanWorkers(const BenchOptions& o, SteadyTime start, RequestBudget* budget,
                                    ProgressCounters* progress) {
  int connections = o.mode == LoadMode::kClosedLoop ? o.concurrency : o.max_connections;
  int workers = std::min(o.threads, connections);
  SteadyTime record_from = start + ToNanos(o.warmup);
  std::vector<WorkerPlan> plans;
  for (int i = 0; i < workers; ++i) {
    WorkerPlan plan;
    plan.mode = o.mode;
    plan.connections = Share(connections, workers, i);
    // Each worker takes every workers-th arrival: constant schedules interleave by phase; independent Poisson
    // streams of rate R/n add up to one of rate R.
    plan.arrivals =
        ArrivalSchedule::Options{.rate_per_s = o.request_rate / workers,
                                 .arrivals = o.arrivals,
                                 .seed = o.seed + static_cast<uint64_t>(i),
                                 .phase = o.arrivals == Arrivals::kConstant ? ToNanos(Seconds(i / o.request_rate))
                                                                            : std::chrono::nanoseconds(0)};
    plan.start = start;
    plan.record_from = record_from;
    if (o.duration) plan.send_until = record_from + ToNanos(*o.duration);
    plan.request_timeout = ToNanos(o.request_timeout);
    plan.budget = budget;
    plan.progress = progress;
    plans.push_back(plan);
  }
  return plans;
}

void PrintProgress(std::ostream& out, Seconds elapsed, Seconds warmup, const ProgressCounters& counters,
                   uint64_t answered_before, Seconds since_last) {
  char line[200];
  if (elapsed < warmup) {
    std::snprintf(line, sizeof(line), "[%6.1fs] warming up (%.1f s)\n", elapsed.count(), warmup.count());
  } else {
    uint64_t answered = counters.answered.load(std::memory_order_relaxed);
    double rate = since_last.count() > 0 ? static_cast<double>(answered - answered_before) / since_last.count() : 0;
    std::snprintf(line, sizeof(line), "[%6.1fs] sent %llu  answered %llu  rate %.1f/s  errors %llu\n", elapsed.count(),
                  static_cast<unsigned long long>(counters.sent.load(std::memory_order_relaxed)),
                  static_cast<unsigned long long>(answered), rate,
                  static_cast<unsigned long long>(counters.errors.load(std::memory_order_relaxed)));
  }
  out << line << std::flush;
}

}  // namespace

Result<BenchReport> RunBench(const BenchOptions& options, std::ostream* progress) {
  WEFT_RETURN_IF_ERROR(ValidateBenchOptions(options));
  BenchOptions effective = options;
  if (!effective.duration && !effective.requests) effective.duration = Seconds(10);

  std::unique_ptr<Transport> transport;
  PreparedRun run;
  if (options.protocol == Protocol::kGrpc) {
    WEFT_ASSIGN_OR_RETURN(std::string target, ParseGrpcTarget(options.url));
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<GrpcTransport> grpc, GrpcTransport::Create(target, options.headers));
    WEFT_ASSIGN_OR_RETURN(run, PrepareGrpcRequest(effective, *grpc));
    transport = std::move(grpc);
  } else {
    WEFT_ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(options.url));
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<HttpTransport> http, HttpTransport::Create(url, options.headers));
    WEFT_ASSIGN_OR_RETURN(run, PrepareRequest(effective, url, *http));
    transport = std::move(http);
  }
  // Unregisters the run's shared memory regions when the run ends, whichever way (the objects unlink themselves).
  struct Cleanup {
    std::function<void()> f;
    ~Cleanup() {
      if (f) f();
    }
  } cleanup{run.cleanup};
  std::shared_ptr<const WireRequest> wire = transport->Encode(run.request);

  RequestBudget budget(effective.requests);
  ProgressCounters counters;
  SteadyTime start = std::chrono::steady_clock::now();
  if (effective.mode == LoadMode::kOpenLoop) start += kOpenLoopLead;
  std::vector<WorkerPlan> plans = PlanWorkers(effective, start, &budget, &counters);
  std::vector<std::unique_ptr<LoadWorker>> workers;
  for (const WorkerPlan& plan : plans) workers.push_back(std::make_unique<LoadWorker>(plan, *transport, wire));

  std::mutex mu;
  std::condition_variable cv;
  size_t finished = 0;  // guarded by mu
  {
    std::vector<std::jthread> threads;
    for (auto& worker : workers) {
      threads.emplace_back([&, w = worker.get()] {
        w->Run();
        std::lock_guard lock(mu);
        ++finished;
        cv.notify_all();
      });
    }
    SteadyTime last_line = std::chrono::steady_clock::now();
    uint64_t answered_at_last_line = 0;
    std::unique_lock lock(mu);
    while (finished < workers.size()) {
      if (cv.wait_until(lock, last_line + std::chrono::seconds(1), [&] { return finished == workers.size(); })) break;
      SteadyTime now = std::chrono::steady_clock::now();
      if (progress) {
        PrintProgress(*progress, now - start, effective.warmup, counters, answered_at_last_line, now - last_line);
      }
      answered_at_last_line = counters.answered.load(std::memory_order_relaxed);
      last_line = now;
    }
  }  // the threads join here

  RunStats stats;
  for (const auto& worker : workers) stats.Merge(worker->stats());
  SteadyTime record_from = plans.front().record_from;
  // The window the rates are over: the sending phase, stretched to the last answer when answers came later. A
  // server that stops answering does not shorten it.
  SteadyTime end = std::max(stats.sending_ended, stats.last_answer);
  if (end <= record_from) end = std::chrono::steady_clock::now();
  return BuildReport(effective, stats, end - record_from);
}

int RunBenchCommand(const BenchOptions& options, std::ostream& out, std::ostream& err) {
  // A peer that closes mid-write must be an io_error, not the end of the process.
  std::signal(SIGPIPE, SIG_IGN);
  // One descriptor per connection: lift the soft limit (often 1024) toward the hard one.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  Result<BenchReport> report = RunBench(options, options.progress ? &err : nullptr);
  if (!report.ok()) {
    err << "weft bench: " << report.status().message() << "\n";
    StatusCode code = report.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kUnimplemented ? 2 : 1;
  }
  out << (options.json ? RenderJson(*report) : RenderTable(*report)) << std::flush;
  uint64_t connect_errors = 0;
  for (const OutcomeSummary& s : report->outcomes) {
    if (s.outcome == kOutcomeConnectError) connect_errors = s.count;
  }
  if (report->sent > 0 && connect_errors == report->sent) {
    err << "weft bench: the server could not be reached: no request got a connection\n";
    return 1;
  }
  return 0;
}

}  // namespace weft
