#include "trace/tracer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/json_string.h"
#include "base/log.h"
#include "metrics/metrics.h"
#ifdef WEFT_TRACE_OTLP
#include "trace/otlp_encoding.h"
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
    "HTTP_RECV_START", "HTTP_RECV_END",        "REQUEST_START", "QUEUE_START", "COMPUTE_START",   "COMPUTE_INPUT_END",
    "INFER_START",     "COMPUTE_OUTPUT_START", "COMPUTE_END",   "REQUEST_END", "HTTP_SEND_START", "HTTP_SEND_END"};
constexpr std::array<const char*, kTraceStageCount> kGrpcStageNames = {
    "GRPC_WAITREAD_END", "GRPC_WAITREAD_END",    "REQUEST_START", "QUEUE_START", "COMPUTE_START",   "COMPUTE_INPUT_END",
    "INFER_START",       "COMPUTE_OUTPUT_START", "COMPUTE_END",   "REQUEST_END", "GRPC_SEND_START", "GRPC_SEND_END"};

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
    if (otlp != nullptr) {
      // What is queued gets a short while to go: the server is exiting.
      OtlpExporter::Options last = OtlpExporter::OptionsFrom(settings_);
      last.timeout = std::chrono::seconds(2);
      otlp->SetOptions(std::move(last));
      otlp.reset();
    }
#endif
    file_.Close();
  }

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }

  // The sampling scope of `model`, valid until this thread's next call. Each thread keeps its own reference to the
  // scopes and takes the lock only after a settings change: the request path shares no lock and writes no shared
  // reference count.
  SamplingScope* ScopeFor(std::string_view model) const {
    struct Cache {
      uint64_t core = 0;
      uint64_t generation = 0;
      std::shared_ptr<const ScopeTable> table;
    };
    thread_local Cache cache;
    const uint64_t generation = generation_.load(std::memory_order_acquire);
    if (cache.core != id_ || cache.generation != generation) {
      std::lock_guard lock(mu_);
      cache = {id_, generation_.load(std::memory_order_relaxed), table_};
    }
    auto it = cache.table->models.find(model);
    return it != cache.table->models.end() ? it->second.get() : cache.table->server.get();
  }

  TraceMode mode() const { return mode_.load(std::memory_order_relaxed); }

  void CountTrace() {
    if (traces_ != nullptr) traces_->Increment();
  }

  // Spans encoded by AppendOtlpSpan on the thread that ended the trace: the exporter's thread only concatenates
  // them, and no span's memory crosses threads.
  void ExportEncoded(std::string encoded, size_t count) {
#ifdef WEFT_TRACE_OTLP
    std::lock_guard lock(mu_);
    if (otlp_ != nullptr) otlp_->AddEncoded(std::move(encoded), count);
#else
    if (dropped_ != nullptr) dropped_->Increment(static_cast<double>(count));
#endif
  }

  void ExportSpan(const SpanData& span) {
    std::string encoded;
#ifdef WEFT_TRACE_OTLP
    AppendOtlpSpan(span, &encoded);
#endif
    ExportEncoded(std::move(encoded), 1);
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
      if (!update.contains("trace_count")) next.count = table_->server->remaining.load(std::memory_order_relaxed);
      ApplyLocked(std::move(next));
      return ViewLocked(model);
    }
    const auto it = model_settings_.find(model);
    const ModelTraceSettings current = it != model_settings_.end() ? it->second : ModelTraceSettings{};
    WEFT_ASSIGN_OR_RETURN(ModelTraceSettings next, ApplyModelTraceSettingUpdate(current, update));
    if (const auto scope = table_->models.find(model);
        next.count && !update.contains("trace_count") && scope != table_->models.end()) {
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
                                  table_ == nullptr;
    settings_ = std::move(next);
    mode_.store(settings_.mode, std::memory_order_relaxed);
    if (settings_.mode == TraceMode::kOpenTelemetry) {
#ifdef WEFT_TRACE_OTLP
      OtlpExporter::Options options = OtlpExporter::OptionsFrom(settings_);
      if (otlp_ == nullptr) {
        otlp_ =
            std::make_unique<OtlpExporter>(std::move(options), OtlpExporter::Counters{exported_, dropped_, failures_});
      } else {
        otlp_->SetOptions(std::move(options));
      }
#else
      WEFT_LOG(Error) << "this build has no OpenTelemetry exporter (it is built with the server): spans are dropped";
#endif
      file_.Configure("", 0);
    } else {
      // An exporter stays, idle once it has sent what it holds: destroying it here would wait for a collector that
      // may not answer, under the lock every traced request takes.
      file_.Configure(settings_.file, settings_.log_frequency);
    }
    if (sampling_changed) RebuildScopesLocked(/*server_changed=*/true, "");
  }

  // The settings in force for `model` (empty: the server's), with trace_count as what is left of it, as Triton
  // answers.
  std::map<std::string, std::vector<std::string>> ViewLocked(const std::string& model) const {
    const auto it = model.empty() ? model_settings_.end() : model_settings_.find(model);
    auto view = TraceSettingsView(settings_, it != model_settings_.end() ? &it->second : nullptr);
    const auto scope = model.empty() ? table_->models.end() : table_->models.find(model);
    const SamplingScope& counting = scope != table_->models.end() ? *scope->second : *table_->server;
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
    // A new table, never a change to the one the threads' caches hold.
    auto table = table_ != nullptr ? std::make_shared<ScopeTable>(*table_) : std::make_shared<ScopeTable>();
    if (server_changed) {
      table->server = make(nullptr);
      for (auto& [name, own] : model_settings_) table->models[name] = make(&own);
    } else {
      const auto it = model_settings_.find(model);
      if (it == model_settings_.end()) {
        table->models.erase(model);
      } else {
        table->models[model] = make(&it->second);
      }
    }
    bool any = table->server->timestamps;
    for (const auto& [name, scope] : table->models) any = any || scope->timestamps;
    table_ = std::move(table);
    generation_.fetch_add(1, std::memory_order_release);
    enabled_.store(any, std::memory_order_relaxed);
  }

  // The sampling scopes: the server's, and those of the models with settings of their own. ScopeFor hands out the
  // table as of the last change.
  struct ScopeTable {
    std::shared_ptr<SamplingScope> server;
    std::map<std::string, std::shared_ptr<SamplingScope>, std::less<>> models;
  };
  static uint64_t NextId() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  const uint64_t id_ = NextId();  // tells the threads' caches of different tracers apart
  std::atomic<bool> enabled_{false};
  std::atomic<TraceMode> mode_{TraceMode::kTriton};  // settings_.mode, read without the lock
  std::atomic<uint64_t> generation_{0};
  mutable std::mutex mu_;
  std::shared_ptr<const ScopeTable> table_;                                // guarded by mu_
  TraceSettings settings_;                                                 // guarded by mu_
  std::map<std::string, ModelTraceSettings, std::less<>> model_settings_;  // guarded by mu_
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
      wall_at_arrival_ns_(
          WallNowNs() - static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(
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
  core_->ExportSpan(span);
}

void RequestTrace::End() {
  if (ended_.exchange(true)) return;
  if (!stamp(TraceStage::kSendEnd)) Stamp(TraceStage::kSendEnd);
  std::lock_guard lock(mu_);
  const SteadyTime arrival = *stamp(TraceStage::kRecvStart);
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
      if (protocol_ != TraceProtocol::kHttp && i == static_cast<size_t>(TraceStage::kRecvEnd)) continue;
      std::optional<SteadyTime> at = stamp(static_cast<TraceStage>(i));
      if (!at) continue;
      out += first ? "" : ",";
      first = false;
      out += "{\"name\":\"";
      out += names[i];
      out += "\",\"ns\":" +
             std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(at->time_since_epoch()).count()) + "}";
    }
    out += "]}";
    core_->WriteRecord(out);
    return;
  }

#ifdef WEFT_TRACE_OTLP
  // Each span is filled into one SpanData that this thread reuses, and appended encoded at once: its strings and
  // vectors keep their capacity from one trace to the next, so a traced request allocates little more than the
  // encoded bytes it hands to the exporter.
  thread_local SpanData span;
  std::string encoded;
  encoded.reserve(2048);
  size_t count = 0;
  size_t attributes = 0;
  auto begin = [&](std::string_view name, std::string_view suffix, const SpanId& id, const SpanId& parent,
                   SteadyTime start, SteadyTime end, SpanData::Kind kind) {
    span.trace_id = trace_id_;
    span.span_id = id;
    span.parent_span_id = parent;
    span.trace_state.assign(trace_state_);
    span.name.assign(name);
    span.name.append(suffix);
    span.kind = kind;
    span.start_unix_ns = WallNs(start);
    span.end_unix_ns = WallNs(end);
    span.links.clear();
    span.status = SpanData::StatusCode::kUnset;
    span.status_message.clear();
    attributes = 0;
  };
  auto text = [&](std::string_view key, std::string_view value) {
    if (attributes == span.attributes.size()) span.attributes.emplace_back();
    auto& [k, v] = span.attributes[attributes++];
    k.assign(key);
    if (auto* held = std::get_if<std::string>(&v)) {
      held->assign(value);
    } else {
      v = std::string(value);
    }
  };
  auto number = [&](std::string_view key, int64_t value) {
    if (attributes == span.attributes.size()) span.attributes.emplace_back();
    auto& [k, v] = span.attributes[attributes++];
    k.assign(key);
    v = value;
  };
  auto finish = [&] {
    span.attributes.resize(attributes);
    AppendOtlpSpan(span, &encoded);
    ++count;
  };
  auto mark_error = [&] {
    if (outcome_.ok()) return;
    span.status = SpanData::StatusCode::kError;
    span.status_message.assign(outcome_.message());
    text("error.type", StatusCodeName(outcome_.code()));
  };
  // A child span over two stages, when both were stamped in order; its id, or nullopt.
  auto child = [&](std::string_view name, std::string_view suffix, const SpanId& parent, TraceStage from,
                   TraceStage to) -> std::optional<SpanId> {
    std::optional<SteadyTime> start = stamp(from), end = stamp(to);
    if (!start || !end || *end < *start) return std::nullopt;
    const SpanId id = NewSpanId();
    begin(name, suffix, id, parent, *start, *end, SpanData::Kind::kInternal);
    return id;
  };
  const std::string_view outcome = outcome_.ok() ? std::string_view("ok") : StatusCodeName(outcome_.code());

  const bool http = protocol_ == TraceProtocol::kHttp;
  const bool stream = protocol_ == TraceProtocol::kGrpcStream;
  begin(http     ? "POST /v2/models/{model}/infer"
        : stream ? "inference.GRPCInferenceService/ModelStreamInfer"
                 : "inference.GRPCInferenceService/ModelInfer",
        "", server_span_, parent_, arrival, *stamp(TraceStage::kSendEnd), SpanData::Kind::kServer);
  if (http) {
    text("http.request.method", "POST");
    text("http.route", "/v2/models/{model}/infer");
  } else {
    text("rpc.system", "grpc");
    text("rpc.service", "inference.GRPCInferenceService");
    text("rpc.method", stream ? "ModelStreamInfer" : "ModelInfer");
  }
  text("weft.model", model_);
  number("weft.model_version", version_);
  if (!request_id_.empty()) text("weft.request_id", request_id_);
  number("weft.priority", priority_);
  text("weft.outcome", outcome);
  mark_error();
  finish();

  if (http && child("read", "", server_span_, TraceStage::kRecvStart, TraceStage::kRecvEnd)) finish();
  if (child("decode", "", server_span_, http ? TraceStage::kRecvEnd : TraceStage::kRecvStart,
            TraceStage::kRequestStart)) {
    finish();
  }
  if (std::optional<SpanId> model =
          child("model ", model_, server_span_, TraceStage::kRequestStart, TraceStage::kRequestEnd)) {
    text("weft.model", model_);
    number("weft.model_version", version_);
    text("weft.outcome", outcome);
    mark_error();
    finish();
    if (child("queue", "", *model, TraceStage::kQueueStart, TraceStage::kComputeStart)) finish();
    if (std::optional<SpanId> compute =
            child("compute", "", *model, TraceStage::kComputeStart, TraceStage::kComputeEnd)) {
      if (batch_) {
        span.links.push_back(*batch_);
        number("weft.batch_size", batch_items_);
      }
      finish();
      if (child("compute_input", "", *compute, TraceStage::kComputeStart, TraceStage::kComputeInputEnd)) finish();
      if (child("compute_infer", "", *compute, TraceStage::kInferStart, TraceStage::kComputeOutputStart)) finish();
      if (child("compute_output", "", *compute, TraceStage::kComputeOutputStart, TraceStage::kComputeEnd)) finish();
    }
  }
  if (child("encode", "", server_span_, TraceStage::kRequestEnd, TraceStage::kSendStart)) finish();
  if (child("write", "", server_span_, TraceStage::kSendStart, TraceStage::kSendEnd)) finish();
  core_->ExportEncoded(std::move(encoded), count);
#else
  core_->ExportEncoded(std::string(), 0);
#endif
}

// --- Tracer ---

Tracer::Tracer(TraceSettings settings, MetricsRegistry* metrics)
    : core_(std::make_shared<TracerCore>(std::move(settings), metrics)) {}

Tracer::~Tracer() = default;

bool Tracer::active() const { return core_->enabled(); }

std::shared_ptr<RequestTrace> Tracer::MaybeStart(std::string_view model, TraceProtocol protocol,
                                                 std::string_view traceparent, std::string_view tracestate,
                                                 SteadyTime arrival) {
  if (!core_->enabled()) return nullptr;
  SamplingScope* scope = core_->ScopeFor(model);
  std::optional<TraceContext> caller = traceparent.empty() ? std::nullopt : ParseTraceContext(traceparent, tracestate);
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
    return std::make_shared<RequestTrace>(core_, protocol, std::string(model), caller->trace_id, caller->parent_span_id,
                                          std::move(caller->trace_state), arrival);
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
