#include "trace/tracer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/json_string.h"
#include "base/log.h"
#include "metrics/metrics.h"
#ifdef WEFT_TRACE_OTLP
#include "trace/otlp_exporter.h"
#endif
#include "trace/trace_context.h"

namespace weft {

bool ShouldTrace(const SamplingInput& in) {
  if (!in.timestamps || in.remaining == 0) return false;
  if (in.parent_based && in.caller) return *in.caller;
  return in.rate > 0 && in.sequence % in.rate == 0;
}

namespace {

constexpr std::array<const char*, kTraceStageCount> kHttpStageNames = {
    "HTTP_RECV_START", "HTTP_RECV_END", "REQUEST_START",        "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
    "INFER_START",     "COMPUTE_OUTPUT_START", "COMPUTE_END",   "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"};
constexpr std::array<const char*, kTraceStageCount> kGrpcStageNames = {
    "GRPC_WAITREAD_END", "GRPC_WAITREAD_END", "REQUEST_START", "QUEUE_START", "COMPUTE_START", "COMPUTE_INPUT_END",
    "INFER_START",       "COMPUTE_OUTPUT_START", "COMPUTE_END", "REQUEST_END", "GRPC_SEND_START", "GRPC_SEND_END"};

uint64_t WallNowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

// Triton's trace file: a JSON array of records, two per trace (the model, then the timestamps), as Triton's
// trace_summary.py reads them. With log_frequency N the array is closed and a new file (<file>.<k>) begun every N
// traces; with 0 there is one file, closed at shutdown or when the settings name another. Writes go through stdio's
// buffer under the tracer's file lock: a sampled request pays a short copy, not a system call.
class TraceFile {
 public:
  ~TraceFile() { Close(); }

  void Configure(const std::string& path, uint64_t log_frequency) {
    std::lock_guard lock(mu_);
    if (path == path_ && log_frequency == log_frequency_) return;
    CloseLocked();
    path_ = path;
    log_frequency_ = log_frequency;
    index_ = 0;
  }

  void Write(const std::string& records) {
    std::lock_guard lock(mu_);
    if (path_.empty()) return;
    if (file_ == nullptr && !OpenLocked()) return;
    std::fputs(in_file_ == 0 ? "[\n" : ",\n", file_);
    std::fwrite(records.data(), 1, records.size(), file_);
    if (log_frequency_ > 0 && ++in_file_ >= log_frequency_) {
      CloseLocked();
    } else if (log_frequency_ == 0) {
      ++in_file_;
    }
  }

  void Close() {
    std::lock_guard lock(mu_);
    CloseLocked();
  }

 private:
  bool OpenLocked() {
    const std::string name = log_frequency_ > 0 ? path_ + "." + std::to_string(index_++) : path_;
    file_ = std::fopen(name.c_str(), "w");
    if (file_ == nullptr) {
      if (!warned_) {
        WEFT_LOG(Error) << "trace file " << name << " cannot be written: " << std::strerror(errno);
      }
      warned_ = true;
      return false;
    }
    warned_ = false;
    in_file_ = 0;
    return true;
  }
  void CloseLocked() {
    if (file_ == nullptr) return;
    std::fputs(in_file_ == 0 ? "[]\n" : "\n]\n", file_);
    std::fclose(file_);
    file_ = nullptr;
    in_file_ = 0;
  }

  std::mutex mu_;
  std::string path_;            // guarded by mu_
  uint64_t log_frequency_ = 0;  // guarded by mu_
  uint64_t index_ = 0;          // guarded by mu_: the next file's number
  uint64_t in_file_ = 0;        // guarded by mu_: traces in the open file
  std::FILE* file_ = nullptr;   // guarded by mu_
  bool warned_ = false;         // guarded by mu_
};

// The sampling state of the server or of one model with its own settings. Replaced, never changed, when the
// settings change, so that a request holds a consistent copy without a lock.
struct SamplingScope {
  bool timestamps = false;
  uint64_t rate = 0;
  bool parent_based = true;
  std::atomic<uint64_t> sequence{0};
  std::atomic<int64_t> remaining{-1};

  // Takes one trace from the count, or false when none is left.
  bool TakeOne() {
    int64_t left = remaining.load(std::memory_order_relaxed);
    while (left != 0) {
      if (left < 0) return true;
      if (remaining.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return true;
    }
    return false;
  }
};

}  // namespace

class TracerCore {
 public:
  TracerCore(TraceSettings settings, MetricsRegistry* metrics) {
    if (metrics != nullptr) {
      traces_ = metrics->GetCounter("weft_traces_total", "Requests traced (sampled).");
      records_ = metrics->GetCounter("weft_trace_file_records_total", "Traces written to the Triton trace file.");
      exported_ = metrics->GetCounter("weft_trace_spans_exported_total",
                                      "Spans accepted by the OpenTelemetry collector (OTLP/HTTP).");
      dropped_ = metrics->GetCounter("weft_trace_spans_dropped_total",
                                     "Spans dropped: the export queue was full, or the collector refused them or could "
                                     "not be reached after the retries.");
      failures_ = metrics->GetCounter("weft_trace_export_failures_total",
                                      "OTLP/HTTP export requests that failed after their retries.");
    }
    std::lock_guard lock(mu_);
    ApplyLocked(std::move(settings));
  }

  ~TracerCore() {
#ifdef WEFT_TRACE_OTLP
    std::unique_ptr<OtlpExporter> otlp;
    {
      std::lock_guard lock(mu_);
      otlp = std::move(otlp_);
    }
    otlp.reset();  // sends what is queued, within its timeout
#endif
    file_.Close();
  }

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  std::shared_ptr<SamplingScope> ScopeFor(std::string_view model) const {
    std::lock_guard lock(mu_);
    auto it = model_scopes_.find(model);
    return it != model_scopes_.end() ? it->second : server_scope_;
  }

  TraceMode mode() const {
    std::lock_guard lock(mu_);
    return settings_.mode;
  }

  void CountTrace() {
    if (traces_ != nullptr) traces_->Increment();
  }

  void ExportSpans(std::vector<SpanData> spans) {
#ifdef WEFT_TRACE_OTLP
    std::lock_guard lock(mu_);
    if (otlp_ != nullptr) otlp_->Add(std::move(spans));
#else
    if (dropped_ != nullptr) dropped_->Increment(static_cast<double>(spans.size()));
#endif
  }

  void WriteRecord(const std::string& records) {
    file_.Write(records);
    if (records_ != nullptr) records_->Increment();
  }

  Result<std::map<std::string, std::vector<std::string>>> Update(const std::string& model,
                                                                 const TraceSettingUpdate& update) {
    std::lock_guard lock(mu_);
    if (model.empty()) {
      WEFT_ASSIGN_OR_RETURN(TraceSettings next, ApplyTraceSettingUpdate(settings_, update));
      // trace_count is what is left: an update that does not set it keeps what is left.
      if (!update.contains("trace_count")) next.count = server_scope_->remaining.load(std::memory_order_relaxed);
      ApplyLocked(std::move(next));
      return ViewLocked(model);
    }
    const auto it = model_settings_.find(model);
    const ModelTraceSettings current = it != model_settings_.end() ? it->second : ModelTraceSettings{};
    WEFT_ASSIGN_OR_RETURN(ModelTraceSettings next, ApplyModelTraceSettingUpdate(current, update));
    if (const auto scope = model_scopes_.find(model);
        next.count && !update.contains("trace_count") && scope != model_scopes_.end()) {
      next.count = scope->second->remaining.load(std::memory_order_relaxed);
    }
    if (!next.timestamps && !next.rate && !next.count) {
      model_settings_.erase(model);
    } else {
      model_settings_[model] = next;
    }
    RebuildScopesLocked(/*server_changed=*/false, model);
    return ViewLocked(model);
  }

  std::map<std::string, std::vector<std::string>> View(const std::string& model) const {
    std::lock_guard lock(mu_);
    return ViewLocked(model);
  }

  TraceSettings settings() const {
    std::lock_guard lock(mu_);
    return settings_;
  }

 private:
  void ApplyLocked(TraceSettings next) {
    const bool sampling_changed = next.timestamps != settings_.timestamps || next.rate != settings_.rate ||
                                  next.count != settings_.count || next.parent_based != settings_.parent_based ||
                                  server_scope_ == nullptr;
    settings_ = std::move(next);
    if (settings_.mode == TraceMode::kOpenTelemetry) {
#ifdef WEFT_TRACE_OTLP
      OtlpExporter::Options options = OtlpExporter::OptionsFrom(settings_);
      if (otlp_ == nullptr) {
        otlp_ = std::make_unique<OtlpExporter>(std::move(options),
                                               OtlpExporter::Counters{exported_, dropped_, failures_});
      } else {
        otlp_->SetOptions(std::move(options));
      }
#else
      WEFT_LOG(Error) << "this build has no OpenTelemetry exporter (it is built with the server): spans are dropped";
#endif
      file_.Configure("", 0);
    } else {
#ifdef WEFT_TRACE_OTLP
      // The exporter's destructor sends what it holds, under the lock: a mode change is rare, and its wait is
      // bounded by the export timeout.
      otlp_.reset();
#endif
      file_.Configure(settings_.file, settings_.log_frequency);
    }
    if (sampling_changed) RebuildScopesLocked(/*server_changed=*/true, "");
  }

  // The settings in force for `model` (empty: the server's), with trace_count as what is left of it, as Triton
  // answers.
  std::map<std::string, std::vector<std::string>> ViewLocked(const std::string& model) const {
    const auto it = model.empty() ? model_settings_.end() : model_settings_.find(model);
    auto view = TraceSettingsView(settings_, it != model_settings_.end() ? &it->second : nullptr);
    const auto scope = model.empty() ? model_scopes_.end() : model_scopes_.find(model);
    const SamplingScope& counting = scope != model_scopes_.end() ? *scope->second : *server_scope_;
    view["trace_count"] = {std::to_string(counting.remaining.load(std::memory_order_relaxed))};
    return view;
  }

  // New scopes for the server (and every model that follows it) or for one model.
  void RebuildScopesLocked(bool server_changed, const std::string& model) {
    auto make = [&](const ModelTraceSettings* own) {
      auto scope = std::make_shared<SamplingScope>();
      scope->timestamps = own && own->timestamps ? *own->timestamps : settings_.timestamps;
      scope->rate = own && own->rate ? *own->rate : settings_.rate;
      scope->parent_based = settings_.parent_based;
      scope->remaining.store(own && own->count ? *own->count : settings_.count, std::memory_order_relaxed);
      return scope;
    };
    if (server_changed) {
      server_scope_ = make(nullptr);
      for (auto& [name, own] : model_settings_) model_scopes_[name] = make(&own);
    } else {
      const auto it = model_settings_.find(model);
      if (it == model_settings_.end()) {
        model_scopes_.erase(model);
      } else {
        model_scopes_[model] = make(&it->second);
      }
    }
    bool any = server_scope_->timestamps;
    for (const auto& [name, scope] : model_scopes_) any = any || scope->timestamps;
    enabled_.store(any, std::memory_order_relaxed);
  }

  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;
  TraceSettings settings_;                                                      // guarded by mu_
  std::map<std::string, ModelTraceSettings, std::less<>> model_settings_;       // guarded by mu_
  std::shared_ptr<SamplingScope> server_scope_;                                 // guarded by mu_
  std::map<std::string, std::shared_ptr<SamplingScope>, std::less<>> model_scopes_;  // guarded by mu_
#ifdef WEFT_TRACE_OTLP
  std::unique_ptr<OtlpExporter> otlp_;  // guarded by mu_
#endif
  TraceFile file_;
  Counter* traces_ = nullptr;
  Counter* records_ = nullptr;
  Counter* exported_ = nullptr;
  Counter* dropped_ = nullptr;
  Counter* failures_ = nullptr;
};

// --- RequestTrace ---

RequestTrace::RequestTrace(std::shared_ptr<TracerCore> core, TraceProtocol protocol, std::string model,
                           TraceId trace_id, SpanId parent, std::string trace_state, SteadyTime arrival)
    : core_(std::move(core)),
      protocol_(protocol),
      trace_id_(trace_id),
      parent_(parent),
      server_span_(NewSpanId()),
      trace_state_(std::move(trace_state)),
      wall_at_arrival_ns_(WallNowNs() - static_cast<uint64_t>(std::max<int64_t>(
                                            0, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::steady_clock::now() - arrival)
                                                   .count()))),
      model_(std::move(model)) {
  for (auto& s : stamps_) s.store(0, std::memory_order_relaxed);
  Stamp(TraceStage::kRecvStart, arrival);
}

RequestTrace::~RequestTrace() { End(); }

std::optional<SteadyTime> RequestTrace::stamp(TraceStage stage) const {
  const SteadyTime::rep at = stamps_[static_cast<size_t>(stage)].load(std::memory_order_relaxed);
  if (at == 0) return std::nullopt;
  return SteadyTime(SteadyTime::duration(at));
}

uint64_t RequestTrace::WallNs(SteadyTime at) const {
  const SteadyTime arrival = SteadyTime(SteadyTime::duration(stamps_[0].load(std::memory_order_relaxed)));
  return wall_at_arrival_ns_ + static_cast<uint64_t>(std::max<int64_t>(
                                   0, std::chrono::duration_cast<std::chrono::nanoseconds>(at - arrival).count()));
}

void RequestTrace::SetModel(std::string_view model, int64_t version) {
  std::lock_guard lock(mu_);
  model_ = model;
  version_ = version;
}

void RequestTrace::SetRequest(std::string_view id, uint32_t priority) {
  std::lock_guard lock(mu_);
  request_id_ = id;
  priority_ = priority;
}

void RequestTrace::SetOutcome(const Status& status) {
  std::lock_guard lock(mu_);
  outcome_ = status;
}

void RequestTrace::JoinBatch(const TraceId& batch_trace, const SpanId& batch_span, int64_t batch_items) {
  std::lock_guard lock(mu_);
  batch_ = SpanData::Link{batch_trace, batch_span, {}};
  batch_items_ = batch_items;
}

void RequestTrace::Export(SpanData span) const {
  if (core_->mode() != TraceMode::kOpenTelemetry) return;
  std::vector<SpanData> spans;
  spans.push_back(std::move(span));
  core_->ExportSpans(std::move(spans));
}

void RequestTrace::End() {
  if (ended_.exchange(true)) return;
  if (!stamp(TraceStage::kSendEnd)) Stamp(TraceStage::kSendEnd);
  std::lock_guard lock(mu_);
  const SteadyTime arrival = *stamp(TraceStage::kRecvStart);
  auto wall = [&](SteadyTime t) { return WallNs(t); };
  const auto& names = protocol_ == TraceProtocol::kHttp ? kHttpStageNames : kGrpcStageNames;

  if (core_->mode() == TraceMode::kTriton) {
    // Two records per trace, keyed by a number unique in this process, as Triton writes them.
    static std::atomic<uint64_t> next_id{1};
    const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
    std::string out = "{\"id\":" + std::to_string(id) + ",\"model_name\":";
    AppendJsonString(&out, model_);
    out += ",\"model_version\":" + std::to_string(version_) + ",\"request_id\":";
    AppendJsonString(&out, request_id_);
    out += ",\"trace_id\":\"" + HexOf(trace_id_) + "\"";
    if (!outcome_.ok()) {
      out += ",\"error\":";
      AppendJsonString(&out, outcome_.message());
    }
    out += "},\n{\"id\":" + std::to_string(id) + ",\"timestamps\":[";
    bool first = true;
    for (size_t i = 0; i < kTraceStageCount; ++i) {
      // gRPC has no separate end of the read: its one timestamp is written once.
      if (protocol_ == TraceProtocol::kGrpc && i == static_cast<size_t>(TraceStage::kRecvEnd)) continue;
      std::optional<SteadyTime> at = stamp(static_cast<TraceStage>(i));
      if (!at) continue;
      out += first ? "" : ",";
      first = false;
      out += "{\"name\":\"";
      out += names[i];
      out += "\",\"ns\":" + std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                               at->time_since_epoch())
                                               .count()) +
             "}";
    }
    out += "]}";
    core_->WriteRecord(out);
    return;
  }

  std::vector<SpanData> spans;
  spans.reserve(11);
  auto add = [&](std::string name, const SpanId& parent, TraceStage from, TraceStage to) -> SpanData* {
    std::optional<SteadyTime> start = stamp(from), end = stamp(to);
    if (!start || !end || *end < *start) return nullptr;
    SpanData& span = spans.emplace_back();
    span.trace_id = trace_id_;
    span.span_id = NewSpanId();
    span.parent_span_id = parent;
    span.trace_state = trace_state_;
    span.name = std::move(name);
    span.start_unix_ns = wall(*start);
    span.end_unix_ns = wall(*end);
    return &span;
  };
  auto mark_error = [&](SpanData* span) {
    if (span == nullptr || outcome_.ok()) return;
    span->status = SpanData::StatusCode::kError;
    span->status_message = outcome_.message();
    span->attributes.emplace_back("error.type", std::string(StatusCodeName(outcome_.code())));
  };
  const std::string outcome = outcome_.ok() ? "ok" : std::string(StatusCodeName(outcome_.code()));

  SpanData& server = spans.emplace_back();
  server.trace_id = trace_id_;
  server.span_id = server_span_;
  server.parent_span_id = parent_;
  server.trace_state = trace_state_;
  server.kind = SpanData::Kind::kServer;
  server.start_unix_ns = wall(arrival);
  server.end_unix_ns = wall(*stamp(TraceStage::kSendEnd));
  if (protocol_ == TraceProtocol::kHttp) {
    server.name = "POST /v2/models/{model}/infer";
    server.attributes.emplace_back("http.request.method", std::string("POST"));
    server.attributes.emplace_back("http.route", std::string("/v2/models/{model}/infer"));
  } else {
    server.name = "inference.GRPCInferenceService/ModelInfer";
    server.attributes.emplace_back("rpc.system", std::string("grpc"));
    server.attributes.emplace_back("rpc.service", std::string("inference.GRPCInferenceService"));
    server.attributes.emplace_back("rpc.method", std::string("ModelInfer"));
  }
  server.attributes.emplace_back("weft.model", model_);
  server.attributes.emplace_back("weft.model_version", version_);
  if (!request_id_.empty()) server.attributes.emplace_back("weft.request_id", request_id_);
  server.attributes.emplace_back("weft.priority", static_cast<int64_t>(priority_));
  server.attributes.emplace_back("weft.outcome", outcome);
  mark_error(&server);
  const SpanId server_id = server_span_;

  if (protocol_ == TraceProtocol::kHttp) add("read", server_id, TraceStage::kRecvStart, TraceStage::kRecvEnd);
  add("decode", server_id, protocol_ == TraceProtocol::kHttp ? TraceStage::kRecvEnd : TraceStage::kRecvStart,
      TraceStage::kRequestStart);
  SpanData* model = add("model " + model_, server_id, TraceStage::kRequestStart, TraceStage::kRequestEnd);
  if (model != nullptr) {
    model->attributes.emplace_back("weft.model", model_);
    model->attributes.emplace_back("weft.model_version", version_);
    model->attributes.emplace_back("weft.outcome", outcome);
    mark_error(model);
    const SpanId model_id = model->span_id;
    add("queue", model_id, TraceStage::kQueueStart, TraceStage::kComputeStart);
    SpanData* compute = add("compute", model_id, TraceStage::kComputeStart, TraceStage::kComputeEnd);
    if (compute != nullptr) {
      if (batch_) {
        compute->links.push_back(*batch_);
        compute->attributes.emplace_back("weft.batch_size", batch_items_);
      }
      const SpanId compute_id = compute->span_id;
      add("compute_input", compute_id, TraceStage::kComputeStart, TraceStage::kComputeInputEnd);
      add("compute_infer", compute_id, TraceStage::kInferStart, TraceStage::kComputeOutputStart);
      add("compute_output", compute_id, TraceStage::kComputeOutputStart, TraceStage::kComputeEnd);
    }
  }
  add("encode", server_id, TraceStage::kRequestEnd, TraceStage::kSendStart);
  add("write", server_id, TraceStage::kSendStart, TraceStage::kSendEnd);
  core_->ExportSpans(std::move(spans));
}

// --- Tracer ---

Tracer::Tracer(TraceSettings settings, MetricsRegistry* metrics)
    : core_(std::make_shared<TracerCore>(std::move(settings), metrics)) {}

Tracer::~Tracer() = default;

std::shared_ptr<RequestTrace> Tracer::MaybeStart(std::string_view model, TraceProtocol protocol,
                                                 std::string_view traceparent, std::string_view tracestate,
                                                 SteadyTime arrival) {
  if (!core_->enabled()) return nullptr;
  std::shared_ptr<SamplingScope> scope = core_->ScopeFor(model);
  std::optional<TraceContext> caller =
      traceparent.empty() ? std::nullopt : ParseTraceContext(traceparent, tracestate);
  SamplingInput in{.timestamps = scope->timestamps,
                   .rate = scope->rate,
                   .parent_based = scope->parent_based,
                   .caller = caller ? std::optional<bool>(caller->sampled) : std::nullopt,
                   .remaining = scope->remaining.load(std::memory_order_relaxed)};
  // The rate counts the requests it decides, so that one in N of them is traced whatever the callers send.
  if (!(in.parent_based && in.caller)) in.sequence = scope->sequence.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!ShouldTrace(in) || !scope->TakeOne()) return nullptr;
  core_->CountTrace();
  if (caller) {
    return std::make_shared<RequestTrace>(core_, protocol, std::string(model), caller->trace_id,
                                          caller->parent_span_id, std::move(caller->trace_state), arrival);
  }
  return std::make_shared<RequestTrace>(core_, protocol, std::string(model), NewTraceId(), SpanId{}, std::string(),
                                        arrival);
}

Result<std::map<std::string, std::vector<std::string>>> Tracer::Update(const std::string& model,
                                                                       const TraceSettingUpdate& update) {
  return core_->Update(model, update);
}

std::map<std::string, std::vector<std::string>> Tracer::View(const std::string& model) const {
  return core_->View(model);
}

TraceSettings Tracer::settings() const { return core_->settings(); }

}  // namespace weft
