#include "frontend/http/inference_service.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <optional>
#include <string_view>
#include <vector>

#include "frontend/http/content_coding.h"
#include "frontend/http/infer_codec.h"
#include "frontend/http/json_writer.h"
#include "frontend/http/logging_codec.h"
#include "frontend/http/repository_codec.h"
#include "frontend/http/rollout_codec.h"
#include "frontend/http/shared_memory_codec.h"
#include "frontend/http/statistics_codec.h"
#include "frontend/http/status_mapping.h"
#include "frontend/http/trace_codec.h"
#include "repository/pbtxt/config_pbtxt.h"

#ifndef WEFT_VERSION
#define WEFT_VERSION "unknown"
#endif

namespace weft {

namespace http = boost::beast::http;
using Endpoint = InferenceService::Endpoint;

namespace {

constexpr const char* kRequestsHelp = "HTTP requests answered, by endpoint and status class.";
constexpr const char* kAllRequestsHelp =
    "Requests answered, by protocol, endpoint and status (HTTP class or gRPC code).";
constexpr std::string_view kEndpointNames[] = {
    "health",     "server_metadata", "model_metadata", "model_ready", "model_config", "infer",  "shared_memory",
    "repository", "rollout",         "statistics",     "logging",     "trace",        "unknown"};
static_assert(std::size(kEndpointNames) == InferenceService::kEndpointCount);

// %XX escapes in one path segment; a malformed escape stays as it is.
std::string PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned value = 0;
    if (s[i] == '%' && i + 2 < s.size()) {
      auto [end, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
      if (ec == std::errc() && end == s.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<std::string> SplitPath(std::string_view path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) segments.push_back(PercentDecode(path.substr(start, end - start)));
    start = end + 1;
  }
  return segments;
}

// A route of the protocol: what it is, which method it takes, and the model and version it names.
struct Route {
  Endpoint endpoint = Endpoint::kUnknown;
  http::verb method = http::verb::get;
  std::string model;
  int64_t version = 0;        // 0 = not given: the highest ready version
  bool server_ready = false;  // for kHealth: /ready rather than /live
  std::string region;         // for kSharedMemory: empty = every region
  bool cuda = false;          // for kSharedMemory: v2/cudasharedmemory rather than v2/systemsharedmemory
  std::string action;         // kSharedMemory: "status", "register" or "unregister"; kRepository: "index", "load"
                              // or "unload"
};

// v2/{system|cuda}sharedmemory[/region/{r}]/{status|register|unregister}; register needs a region.
std::optional<Route> MatchSharedMemoryRoute(const std::vector<std::string>& s) {
  Route route;
  route.endpoint = Endpoint::kSharedMemory;
  route.cuda = s[1] == "cudasharedmemory";
  size_t next = 2;
  if (s.size() == 5 && s[2] == "region") {
    route.region = s[3];
    next = 4;
  }
  if (s.size() != next + 1) return std::nullopt;
  route.action = s[next];
  if (route.action == "status") {
    route.method = http::verb::get;
  } else if (route.action == "unregister" || (route.action == "register" && !route.region.empty())) {
    route.method = http::verb::post;
  } else {
    return std::nullopt;
  }
  return route;
}

// v2/repository/index, v2/repository/models/{m}/load|unload; all POST.
std::optional<Route> MatchRepositoryRoute(const std::vector<std::string>& s) {
  Route route;
  route.endpoint = Endpoint::kRepository;
  route.method = http::verb::post;
  if (s.size() == 3 && s[2] == "index") {
    route.action = "index";
    return route;
  }
  if (s.size() == 5 && s[2] == "models" && (s[4] == "load" || s[4] == "unload")) {
    route.model = s[3];
    route.action = s[4];
    return route;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseVersion(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v <= 0) return std::nullopt;
  return v;
}

// nullopt = no such route (404).
std::optional<Route> MatchRoute(std::string_view path) {
  std::vector<std::string> s = SplitPath(path);
  if (s.empty() || s[0] != "v2") return std::nullopt;
  Route route;
  if (s.size() == 1) {
    route.endpoint = Endpoint::kServerMetadata;
    return route;
  }
  if (s[1] == "health" && s.size() == 3 && (s[2] == "live" || s[2] == "ready")) {
    route.endpoint = Endpoint::kHealth;
    route.server_ready = s[2] == "ready";
    return route;
  }
  if (s[1] == "systemsharedmemory" || s[1] == "cudasharedmemory") return MatchSharedMemoryRoute(s);
  if (s[1] == "repository") return MatchRepositoryRoute(s);
  if (s[1] == "logging" && s.size() == 2) {
    route.endpoint = Endpoint::kLogging;  // GET and POST: checked by HandleLogging
    return route;
  }
  if (s[1] == "trace" && s.size() == 3 && s[2] == "setting") {
    route.endpoint = Endpoint::kTrace;  // GET and POST: checked by HandleTraceSetting
    return route;
  }
  if (s[1] != "models" || s.size() < 3) return std::nullopt;
  if (s.size() == 3 && s[2] == "stats") {
    // Every model's statistics, as in Triton: a model named "stats" has its metadata at .../versions/{v} only.
    route.endpoint = Endpoint::kStatistics;
    return route;
  }
  route.model = s[2];
  size_t next = 3;
  if (s.size() >= 5 && s[3] == "versions") {
    std::optional<int64_t> version = ParseVersion(s[4]);
    if (!version) return std::nullopt;  // the protocol's versions are numbers: anything else names no route
    route.version = *version;
    next = 5;
  }
  if (s.size() == next) {
    route.endpoint = Endpoint::kModelMetadata;
  } else if (s.size() == next + 1 && s[next] == "ready") {
    route.endpoint = Endpoint::kModelReady;
  } else if (s.size() == next + 1 && s[next] == "config") {
    route.endpoint = Endpoint::kModelConfig;
  } else if (s.size() == next + 1 && s[next] == "stats") {
    route.endpoint = Endpoint::kStatistics;
  } else if (s.size() == next + 2 && s[next] == "trace" && s[next + 1] == "setting" && next == 3) {
    route.endpoint = Endpoint::kTrace;
  } else if (s.size() == next + 1 && s[next] == "rollout" && next == 3) {
    route.endpoint = Endpoint::kRollout;  // GET, POST and DELETE: checked by HandleRollout
  } else if (s.size() == next + 1 && s[next] == "infer") {
    route.endpoint = Endpoint::kInfer;
    route.method = http::verb::post;
  } else {
    return std::nullopt;
  }
  return route;
}

HttpResponse JsonResponse(std::string body) {
  HttpResponse response;
  response.body = std::move(body);
  return response;
}

void WriteTensorMetadata(const ModelConfig& config, const std::vector<TensorConfig>& tensors, JsonWriter* json) {
  json->BeginArray();
  for (const TensorConfig& t : tensors) {
    json->BeginObject();
    json->Key("name");
    json->String(t.name);
    json->Key("datatype");
    json->String(DataTypeName(t.data_type));
    json->Key("shape");
    json->BeginArray();
    for (int64_t d : FullShape(config, t)) json->Int(d);
    json->EndArray();
    json->EndObject();
  }
  json->EndArray();
}

std::string ModelMetadataJson(const ModelConfig& config, const std::vector<int64_t>& versions) {
  std::string body;
  JsonWriter json(&body);
  json.BeginObject();
  json.Key("name");
  json.String(config.name);
  json.Key("versions");
  json.BeginArray();
  for (int64_t v : versions) json.String(std::to_string(v));
  json.EndArray();
  json.Key("platform");
  json.String(config.platform.empty() ? config.backend : config.platform);
  json.Key("inputs");
  WriteTensorMetadata(config, config.inputs, &json);
  json.Key("outputs");
  WriteTensorMetadata(config, config.outputs, &json);
  json.EndObject();
  return body;
}

// The parser renders ModelConfig::json, and the repository's name and instance groups are added to it; a config
// built in code may lack it, so the basics are rendered here.
Result<std::string> ModelConfigJson(const ModelConfig& config) {
  if (!config.json.empty()) return ServedConfigJson(config);
  std::string body;
  JsonWriter json(&body);
  json.BeginObject();
  json.Key("name");
  json.String(config.name);
  json.Key("platform");
  json.String(config.platform);
  json.Key("backend");
  json.String(config.backend);
  json.Key("max_batch_size");
  json.Int(config.max_batch_size);
  for (const auto* field : {"input", "output"}) {
    json.Key(field);
    json.BeginArray();
    for (const TensorConfig& t : std::string_view(field) == "input" ? config.inputs : config.outputs) {
      json.BeginObject();
      json.Key("name");
      json.String(t.name);
      json.Key("data_type");
      json.String(DataTypeConfigName(t.data_type));
      json.Key("dims");
      json.BeginArray();
      for (int64_t d : t.dims) json.Int(d);
      json.EndArray();
      json.EndObject();
    }
    json.EndArray();
  }
  json.EndObject();
  return body;
}

// The binary tensor data extension's header: the JSON's length in the body. nullopt when absent.
Result<std::optional<size_t>> JsonSizeHeader(const HttpRequest& request) {
  std::string_view text = request.header("Inference-Header-Content-Length");
  if (text.empty()) return std::optional<size_t>();
  size_t size = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), size);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return InvalidArgument("Inference-Header-Content-Length must be a non-negative integer, got '" + std::string(text) +
                           "'");
  }
  return std::optional<size_t>(size);
}

HttpResponse InferResponseToHttp(const Result<InferenceResponse>& result, const OutputFormat& format) {
  if (!result.ok()) return ErrorResponse(result.status());
  Result<EncodedInferResponse> encoded = EncodeInferResponse(*result, format);
  if (!encoded.ok()) return ErrorResponse(encoded.status());
  HttpResponse response;
  if (!encoded->binary.empty()) {
    response.content_type = "application/octet-stream";
    response.headers.emplace_back("Inference-Header-Content-Length", std::to_string(encoded->json.size()));
    for (const Tensor& t : encoded->binary) response.segments.push_back({t.owner(), t.bytes()});
  }
  response.body = std::move(encoded->json);
  return response;
}

}  // namespace

InferenceService::InferenceService(Engine* engine, MetricsRegistry* metrics)
    : InferenceService(engine, metrics, Options()) {}

InferenceService::InferenceService(Engine* engine, MetricsRegistry* metrics, Options options)
    : engine_(engine), options_(std::move(options)) {
  static constexpr const char* kClasses[] = {"2xx", "4xx", "5xx"};
  for (size_t e = 0; e < kEndpointCount; ++e) {
    for (size_t c = 0; c < 3; ++c) {
      counters_[e].http[c] = metrics->GetCounter("weft_http_requests_total", kRequestsHelp,
                                                 {{"endpoint", std::string(kEndpointNames[e])}, {"code", kClasses[c]}});
      counters_[e].all[c] = metrics->GetCounter(
          "weft_requests_total", kAllRequestsHelp,
          {{"protocol", "http"}, {"endpoint", std::string(kEndpointNames[e])}, {"code", kClasses[c]}});
    }
  }
}

void InferenceService::ResponseCounters::Count(unsigned http_status) const {
  size_t c = http_status < 400 ? 0 : http_status < 500 ? 1 : 2;
  http[c]->Increment();
  all[c]->Increment();
  if (on_answer) on_answer(http_status);
}

namespace {

// What a route needs of its caller (docs/security.md). An unknown route needs what the server metadata needs, so
// that a caller without a credential cannot tell a route from a typo.
Permission PermissionFor(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kHealth: return Permission::kHealth;
    case Endpoint::kInfer: return Permission::kInfer;
    case Endpoint::kSharedMemory: return Permission::kSharedMemory;
    case Endpoint::kRepository:
    case Endpoint::kRollout:
    case Endpoint::kLogging:
    case Endpoint::kTrace: return Permission::kAdmin;
    case Endpoint::kServerMetadata:
    case Endpoint::kModelMetadata:
    case Endpoint::kModelReady:
    case Endpoint::kModelConfig:
    case Endpoint::kStatistics:
    case Endpoint::kUnknown: return Permission::kMetadata;
  }
  return Permission::kAdmin;
}

// "METHOD /path" for the gatekeeper's audit lines, in `buffer`, cut at its size: it is built for every request
// while authentication is on, and an audit line keeps only a route's first 200 bytes anyway.
std::string_view RouteText(const HttpRequest& request, std::array<char, 256>& buffer) {
  const std::string_view method = http::to_string(request.method);
  const std::string_view path = request.path();
  size_t n = std::min(method.size(), buffer.size());
  std::copy_n(method.data(), n, buffer.data());
  if (n < buffer.size()) buffer[n++] = ' ';
  const size_t path_bytes = std::min(path.size(), buffer.size() - n);
  std::copy_n(path.data(), path_bytes, buffer.data() + n);
  return std::string_view(buffer.data(), n + path_bytes);
}

// Counts the response under its endpoint and status class, then sends it.
void Answer(const InferenceService::ResponseCounters& counters, const HttpResponder& responder, HttpResponse response) {
  counters.Count(response.status);
  responder.Send(std::move(response));
}

}  // namespace

void InferenceService::Handle(HttpRequest request, HttpResponder responder) {
  std::optional<Route> route = MatchRoute(request.path());
  const Endpoint endpoint = route ? route->endpoint : Endpoint::kUnknown;
  const ResponseCounters* counters_of_route = &counters_[static_cast<size_t>(endpoint)];
  ResponseCounters audited;  // an admin action's counters, which also write its audit line
  if (options_.gatekeeper != nullptr && options_.gatekeeper->active()) {
    // Before anything else, 404 included: a caller without a credential learns nothing about the routes or models.
    const Permission permission = PermissionFor(endpoint);
    std::array<char, 256> route_buffer;
    const std::string_view route_text = RouteText(request, route_buffer);
    Admission admission =
        options_.gatekeeper->Admit(Caller{.authorization = request.header(http::field::authorization),
                                          .client_subject = request.client_subject,
                                          .peer_address = request.peer_address,
                                          .memo = request.caller_memo},
                                   permission, route ? std::string_view(route->model) : std::string_view(), route_text);
    if (!admission.status.ok()) return Answer(*counters_of_route, responder, AuthErrorResponse(admission.status));
    if ((permission == Permission::kAdmin || permission == Permission::kSharedMemory) &&
        request.method != http::verb::get) {
      audited = *counters_of_route;
      audited.on_answer = [gatekeeper = options_.gatekeeper, admission = std::move(admission),
                           route_text = std::string(route_text)](unsigned status) {
        gatekeeper->AuditAdmin(admission, route_text, std::to_string(status));
      };
      counters_of_route = &audited;
    }
  }
  if (!route) {
    return Answer(*counters_of_route, responder,
                  ErrorResponse(404, "not found: no route for " + std::string(request.path())));
  }
  const auto& counters = *counters_of_route;
  if (route->endpoint == Endpoint::kRollout) return HandleRollout(request, route->model, counters, responder);
  if (route->endpoint == Endpoint::kLogging) return HandleLogging(request, counters, responder);
  if (route->endpoint == Endpoint::kTrace) return HandleTraceSetting(request, route->model, counters, responder);
  if (request.method != route->method) {
    const char* allowed = route->method == http::verb::post ? "POST" : "GET";
    HttpResponse response = ErrorResponse(405, std::string("method not allowed: use ") + allowed);
    response.headers.emplace_back("Allow", allowed);
    return Answer(counters, responder, std::move(response));
  }

  switch (route->endpoint) {
    case Endpoint::kHealth: {
      std::string body;
      JsonWriter json(&body);
      json.BeginObject();
      if (!route->server_ready) {
        json.Key("live");
        json.Bool(true);
        json.EndObject();
        return Answer(counters, responder, JsonResponse(std::move(body)));
      }
      if (draining_.load(std::memory_order_relaxed)) {
        // Load balancers take the server out while it still answers what they send meanwhile.
        return Answer(counters, responder, ErrorResponse(Unavailable("not ready: the server is shutting down")));
      }
      if (engine_->Ready()) {
        json.Key("ready");
        json.Bool(true);
        json.EndObject();
        return Answer(counters, responder, JsonResponse(std::move(body)));
      }
      std::string reasons;
      for (const ModelState& s : engine_->States()) {
        if (s.ready) continue;
        reasons += (reasons.empty() ? "" : "; ") + ("model '" + s.name + "'") +
                   (s.version ? " version " + std::to_string(s.version) : "") + ": " + s.reason;
      }
      return Answer(counters, responder, ErrorResponse(Unavailable("not ready: " + reasons)));
    }

    case Endpoint::kServerMetadata: {
      std::string body;
      JsonWriter json(&body);
      json.BeginObject();
      json.Key("name");
      json.String(options_.server_name);
      json.Key("version");
      json.String(options_.server_version.empty() ? WEFT_VERSION : options_.server_version);
      json.Key("extensions");
      json.BeginArray();
      for (const char* e : {"binary_tensor_data", "classification", "logging", "model_configuration", "parameters",
                            "statistics", "trace"})
        json.String(e);
      if (options_.shared_memory) json.String("system_shared_memory");
      if (options_.shared_memory && SharedMemoryRegistry::CudaAvailable()) json.String("cuda_shared_memory");
      if (options_.repository) {
        json.String("model_repository");
        json.String("model_repository(unload_dependents)");
      }
      json.EndArray();
      json.EndObject();
      return Answer(counters, responder, JsonResponse(std::move(body)));
    }

    case Endpoint::kModelMetadata:
    case Endpoint::kModelConfig: {
      // A specific version must exist; its metadata is served even when it failed to load.
      std::optional<ModelConfig> config;
      if (route->version != 0) {
        auto version = engine_->FindVersion(route->model, route->version);
        if (!version.ok() && version.status().code() == StatusCode::kNotFound) {
          return Answer(counters, responder, ErrorResponse(version.status()));
        }
        if (version.ok()) config = (*version)->config;
      }
      if (!config) {
        Result<ModelConfig> found = engine_->FindConfig(route->model);
        if (!found.ok()) return Answer(counters, responder, ErrorResponse(found.status()));
        config = std::move(found).value();
      }
      if (route->endpoint == Endpoint::kModelMetadata) {
        return Answer(counters, responder,
                      JsonResponse(ModelMetadataJson(*config, engine_->ReadyVersions(route->model))));
      }
      Result<std::string> body = ModelConfigJson(*config);
      if (!body.ok()) return Answer(counters, responder, ErrorResponse(body.status()));
      return Answer(counters, responder, JsonResponse(std::move(body).value()));
    }

    case Endpoint::kModelReady: {
      auto version = engine_->FindVersion(route->model, route->version);
      if (!version.ok()) return Answer(counters, responder, ErrorResponse(version.status()));
      std::string body;
      JsonWriter json(&body);
      json.BeginObject();
      json.Key("name");
      json.String(route->model);
      json.Key("ready");
      json.Bool(true);
      json.EndObject();
      return Answer(counters, responder, JsonResponse(std::move(body)));
    }

    case Endpoint::kStatistics: {
      Result<std::vector<VersionStatistics>> stats = engine_->Statistics(route->model, route->version);
      if (!stats.ok()) return Answer(counters, responder, ErrorResponse(stats.status()));
      return Answer(counters, responder, JsonResponse(EncodeModelStatistics(*stats)));
    }

    case Endpoint::kSharedMemory:
      return HandleSharedMemory(request, route->cuda, route->action, route->region, counters, responder);
    case Endpoint::kRepository: return HandleRepository(request, route->action, route->model, counters, responder);
    case Endpoint::kRollout:
    case Endpoint::kLogging:
    case Endpoint::kTrace: return;  // handled above
    case Endpoint::kInfer: break;
    case Endpoint::kUnknown: return;  // not produced by MatchRoute
  }

  // Inference.
  std::optional<ContentCoding> coding = ParseContentEncoding(request.header(http::field::content_encoding));
  if (!coding) {
    return Answer(counters, responder,
                  ErrorResponse(415, "Content-Encoding '" + std::string(request.header(http::field::content_encoding)) +
                                         "' is not supported: use gzip, deflate or identity"));
  }
  Result<std::optional<size_t>> json_size = JsonSizeHeader(request);
  if (!json_size.ok()) return Answer(counters, responder, ErrorResponse(json_size.status()));
  std::shared_ptr<const RequestBody> content = request.body;
  if (*coding != ContentCoding::kIdentity) {
    // Inference-Header-Content-Length counts the JSON once inflated, so binary tensors start there, aligned.
    Result<RequestBody> inflated =
        DecodeContent(request.body->bytes(), *coding, options_.max_inflated_body_bytes, json_size->value_or(0));
    if (!inflated.ok()) {
      const Status& error = inflated.status();
      return Answer(
          counters, responder,
          error.code() == StatusCode::kResourceExhausted ? ErrorResponse(413, error.message()) : ErrorResponse(error));
    }
    content = std::make_shared<RequestBody>(std::move(*inflated));
  }
  InferBody body{content->bytes(), content, *json_size, options_.shared_memory};
  std::shared_ptr<RequestTrace> trace;
  if (options_.tracer != nullptr && options_.tracer->active()) {
    trace = options_.tracer->MaybeStart(route->model, TraceProtocol::kHttp, request.header("traceparent"),
                                        request.header("tracestate"), request.arrival);
    if (trace) trace->Stamp(TraceStage::kRecvEnd);  // the handler runs once the body is read
  }

  auto decode = [&]() -> Result<DecodedInferRequest> {
    if (*json_size != size_t{0}) return DecodeInferRequest(body, request.arrival);
    // The raw binary form: the model's config says what the body is.
    WEFT_ASSIGN_OR_RETURN(auto version, engine_->FindVersion(route->model, route->version));
    return DecodeRawInferRequest(body, version->config, request.arrival);
  };
  Result<DecodedInferRequest> decoded = decode();
  if (!decoded.ok()) {
    if (trace) trace->SetOutcome(decoded.status());
    return Answer(counters, responder, ErrorResponse(decoded.status()));
  }

  std::unique_ptr<InferenceRequest> infer = std::move(decoded->request);
  infer->model_name = route->model;
  infer->model_version = route->version;
  infer->cancel = request.cancel;
  // A rollout's stickiness by header: the same key as the request parameter a rollout's sticky_key may name.
  if (std::string_view key = request.header("weft-route-key"); !key.empty()) {
    infer->parameters.try_emplace("weft_route_key", std::string(key));
  }
  const ContentCoding answer_coding = ChooseResponseCoding(request.header(http::field::accept_encoding));
  if (trace) {
    infer->trace = trace;
    trace->Stamp(TraceStage::kRequestStart);
  }
  engine_->Submit(std::move(infer), [responder, counters, answer_coding, trace = std::move(trace),
                                     format = std::move(decoded->output_format)](Result<InferenceResponse> result) {
    // Encoding waits for the I/O thread, so that the engine's runner goes back to inference at once.
    // Counted once the server knows what goes out: it may refuse a large answer (429).
    responder.SendBuilt(
        [format, answer_coding, trace, result = std::move(result)] {
          HttpResponse response = InferResponseToHttp(result, format);
          EncodeContent(answer_coding, &response);
          if (trace) {
            trace->Stamp(TraceStage::kSendStart);
            response.on_written = [trace] { trace->End(); };
          }
          return response;
        },
        [counters](unsigned status) { counters.Count(status); });
  });
}

namespace {

void HandleCudaSharedMemory(SharedMemoryRegistry& registry, const HttpRequest& request, const std::string& action,
                            const std::string& region, const InferenceService::ResponseCounters& counters,
                            const HttpResponder& responder) {
  if (action == "status") {
    auto regions = registry.CudaRegions(region);
    if (!regions.ok()) return Answer(counters, responder, ErrorResponse(regions.status()));
    return Answer(counters, responder, JsonResponse(EncodeCudaSharedMemoryStatus(*regions)));
  }
  if (action == "register") {
    Result<CudaSharedMemoryRegistration> body = DecodeCudaSharedMemoryRegistration(request.body->bytes());
    if (!body.ok()) return Answer(counters, responder, ErrorResponse(body.status()));
    Status registered = registry.RegisterCuda(region, body->raw_handle, body->device_id, body->byte_size);
    if (!registered.ok()) return Answer(counters, responder, ErrorResponse(registered));
    return Answer(counters, responder, JsonResponse("{}"));
  }
  if (region.empty()) {
    registry.UnregisterAllCuda();
  } else {
    registry.UnregisterCuda(region);
  }
  return Answer(counters, responder, JsonResponse("{}"));
}

}  // namespace

// The system and CUDA shared memory routes. Off: 501, as for a feature this server lacks.
void InferenceService::HandleSharedMemory(const HttpRequest& request, bool cuda, const std::string& action,
                                          const std::string& region, const ResponseCounters& counters,
                                          const HttpResponder& responder) {
  SharedMemoryRegistry* registry = options_.shared_memory;
  if (registry == nullptr) {
    return Answer(counters, responder,
                  ErrorResponse(Unimplemented("shared memory (system and CUDA) is not enabled on this server "
                                              "(weft serve --allow-shared-memory)")));
  }
  if (cuda) return HandleCudaSharedMemory(*registry, request, action, region, counters, responder);
  if (action == "status") {
    auto regions = registry->Regions(region);
    if (!regions.ok()) return Answer(counters, responder, ErrorResponse(regions.status()));
    return Answer(counters, responder, JsonResponse(EncodeSharedMemoryStatus(*regions)));
  }
  if (action == "register") {
    Result<SharedMemoryRegistration> body = DecodeSharedMemoryRegistration(request.body->bytes());
    if (!body.ok()) return Answer(counters, responder, ErrorResponse(body.status()));
    Status registered = registry->Register(region, body->key, body->offset, body->byte_size);
    if (!registered.ok()) return Answer(counters, responder, ErrorResponse(registered));
    return Answer(counters, responder, JsonResponse("{}"));
  }
  if (region.empty()) {
    registry->UnregisterAll();
  } else {
    registry->Unregister(region);
  }
  return Answer(counters, responder, JsonResponse("{}"));
}

// Triton's logging extension: GET answers the log settings, POST changes them (all the settings it names, or none)
// and answers what they are now.
void InferenceService::HandleLogging(const HttpRequest& request, const ResponseCounters& counters,
                                     const HttpResponder& responder) {
  if (request.method == http::verb::get) {
    return Answer(counters, responder, JsonResponse(EncodeLogSettings(GetLogSettings())));
  }
  if (request.method != http::verb::post) {
    HttpResponse response = ErrorResponse(405, "method not allowed: use GET or POST");
    response.headers.emplace_back("Allow", "GET, POST");
    return Answer(counters, responder, std::move(response));
  }
  Result<LogSettings> updated = UpdateLogSettings([&](LogSettings* settings) -> Status {
    WEFT_ASSIGN_OR_RETURN(*settings, DecodeLogSettingsUpdate(request.body->bytes(), *settings));
    return Status::Ok();
  });
  if (!updated.ok()) return Answer(counters, responder, ErrorResponse(updated.status()));
  WEFT_LOG(Warning) << "log settings changed over HTTP: " << EncodeLogSettings(*updated);
  Answer(counters, responder, JsonResponse(EncodeLogSettings(*updated)));
}

// Triton's trace extension: GET answers the settings in force (the server's, or a model's over the server's), POST
// changes the settings it names (all of them, or none) and answers what they are now.
void InferenceService::HandleTraceSetting(const HttpRequest& request, const std::string& model,
                                          const ResponseCounters& counters, const HttpResponder& responder) {
  if (options_.tracer == nullptr) {
    return Answer(counters, responder, ErrorResponse(Unimplemented("tracing is not enabled on this server")));
  }
  if (!model.empty()) {
    Result<ModelConfig> config = engine_->FindConfig(model);
    if (!config.ok()) return Answer(counters, responder, ErrorResponse(config.status()));
  }
  if (request.method == http::verb::get) {
    return Answer(counters, responder, JsonResponse(TraceSettingsJson(options_.tracer->View(model))));
  }
  if (request.method != http::verb::post) {
    HttpResponse response = ErrorResponse(405, "method not allowed: use GET or POST");
    response.headers.emplace_back("Allow", "GET, POST");
    return Answer(counters, responder, std::move(response));
  }
  Result<TraceSettingUpdate> update = ParseTraceSettingJson(
      std::string_view(reinterpret_cast<const char*>(request.body->bytes().data()), request.body->bytes().size()));
  if (!update.ok()) return Answer(counters, responder, ErrorResponse(update.status()));
  auto updated = options_.tracer->Update(model, *update);
  if (!updated.ok()) return Answer(counters, responder, ErrorResponse(updated.status()));
  WEFT_LOG(Warning) << "trace settings" << (model.empty() ? std::string() : " of model '" + model + "'")
                    << " changed over HTTP";
  Answer(counters, responder, JsonResponse(TraceSettingsJson(*updated)));
}

// Rollouts (docs/rollouts.md): POST starts one, GET reports on it, DELETE rolls it back. Answered from the live
// repository's thread; the I/O thread does not wait.
void InferenceService::HandleRollout(const HttpRequest& request, const std::string& model,
                                     const ResponseCounters& counters, const HttpResponder& responder) {
  LiveRepository* repository = options_.repository;
  if (request.method != http::verb::get && request.method != http::verb::post &&
      request.method != http::verb::delete_) {
    HttpResponse response = ErrorResponse(405, "method not allowed: use GET, POST or DELETE");
    response.headers.emplace_back("Allow", "GET, POST, DELETE");
    return Answer(counters, responder, std::move(response));
  }
  if (repository == nullptr) {
    return Answer(counters, responder, ErrorResponse(Unimplemented("rollouts are not enabled on this server")));
  }
  auto answer = [counters, responder](Result<RolloutReport> report) {
    Answer(counters, responder,
           report.ok() ? JsonResponse(EncodeRolloutReport(*report)) : ErrorResponse(report.status()));
  };
  if (request.method == http::verb::get) return repository->GetRollout(model, std::move(answer));
  if (request.method == http::verb::delete_) return repository->AbortRollout(model, std::move(answer));
  Result<RolloutSpec> spec = DecodeRolloutRequest(request.body->bytes());
  if (!spec.ok()) return Answer(counters, responder, ErrorResponse(spec.status()));
  repository->StartRollout(model, *std::move(spec), std::move(answer));
}

// The model repository extension. Loads answer when the model has loaded or failed, from the live repository's
// thread; the I/O thread does not wait.
void InferenceService::HandleRepository(const HttpRequest& request, const std::string& action, const std::string& model,
                                        const ResponseCounters& counters, const HttpResponder& responder) {
  LiveRepository* repository = options_.repository;
  if (repository == nullptr) {
    return Answer(counters, responder,
                  ErrorResponse(Unimplemented("the model repository extension is not enabled on this server")));
  }
  const std::span<const std::byte> body = request.body->bytes();
  if (action == "index") {
    Result<RepositoryIndexRequest> decoded = DecodeRepositoryIndexRequest(body);
    if (!decoded.ok()) return Answer(counters, responder, ErrorResponse(decoded.status()));
    std::vector<RepositoryIndexEntry> entries;
    for (LiveRepository::IndexEntry& e : repository->Index(decoded->ready)) {
      entries.push_back({std::move(e.name), e.version, std::move(e.state), std::move(e.reason)});
    }
    return Answer(counters, responder, JsonResponse(EncodeRepositoryIndex(entries)));
  }
  auto answer = [counters, responder](Status status) {
    Answer(counters, responder, status.ok() ? JsonResponse("{}") : ErrorResponse(status));
  };
  if (action == "load") {
    Result<RepositoryLoadRequest> decoded = DecodeRepositoryLoadRequest(body);
    if (!decoded.ok()) return Answer(counters, responder, ErrorResponse(decoded.status()));
    return repository->Load(model, std::move(decoded->config), std::move(answer));
  }
  // Models load alone here (no ensembles), so unload_dependents has nothing more to unload.
  Result<RepositoryUnloadRequest> decoded = DecodeRepositoryUnloadRequest(body);
  if (!decoded.ok()) return Answer(counters, responder, ErrorResponse(decoded.status()));
  repository->Unload(model, std::move(answer));
}

}  // namespace weft
