#include "multiplexer/multiplexer.h"

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "base/log.h"
#include "base/stoppable_sleep.h"
#include "base/thread_name.h"

namespace weft {
namespace {

constexpr char kMaxInflightParameter[] = "weft.max_inflight_batches";

double Seconds(SteadyTime::duration d) { return std::chrono::duration<double>(d).count(); }

StreamPriority DevicePriority(PriorityClass c) {
  switch (c) {
    case PriorityClass::kHigh: return StreamPriority::kHigh;
    case PriorityClass::kNormal: return StreamPriority::kNormal;
    case PriorityClass::kBestEffort: return StreamPriority::kLow;
  }
  return StreamPriority::kNormal;
}

ExecutionStream ToExecutionStream(const NativeStream& native) {
  if (native.kind == DeviceKind::kCuda) return {MemoryKind::kGpu, native.device_id, native.handle};
  return {MemoryKind::kCpu, 0, nullptr};
}

// The bound of a model's instances: its parameter, else the class default. INT_MAX for "no bound".
Result<int> MaxInflightOf(const ModelConfig& config, PriorityClass c, const MultiplexerOptions& options,
                          DeviceKind device_kind) {
  int bound = options.best_effort_max_inflight;
  if (c != PriorityClass::kBestEffort) {
    // The device's default: on CUDA the host launches the next batch while the GPU runs the current one. On the
    // CPU device a second batch of a normal model would only be a smaller batch formed early, but an urgent one
    // goes on as soon as its current batch ends (queued behind it on the stream, or run next by the instance's
    // thread), instead of waiting for the completion to come back and then for a worker to free up again.
    const bool two = device_kind == DeviceKind::kCuda || c == PriorityClass::kHigh;
    bound = options.max_inflight > 0 ? options.max_inflight : (two ? 2 : 1);
  }
  std::string text = config.Parameter(kMaxInflightParameter);
  if (!text.empty()) {
    char* end = nullptr;
    long value = std::strtol(text.c_str(), &end, 10);
    if (end == text.c_str() || *end != '\0' || value < 0 || value > 1'000'000) {
      return InvalidArgument(std::string("parameters '") + kMaxInflightParameter +
                             "': expected a whole number >= 0 (0 = no bound), got '" + text + "'");
    }
    bound = static_cast<int>(value);
  }
  return bound <= 0 ? INT_MAX : bound;
}

constexpr char kModelMsPerSecond[] = "weft_model_device_ms_per_second";
constexpr char kModelSeconds[] = "weft_model_device_seconds_total";
constexpr char kMigrations[] = "weft_instance_migrations_total";

}  // namespace

PriorityClass ClassOf(ModelPriority priority) {
  switch (priority) {
    case ModelPriority::kMax: return PriorityClass::kHigh;
    case ModelPriority::kMin: return PriorityClass::kBestEffort;
    case ModelPriority::kDefault: break;
  }
  return PriorityClass::kNormal;
}

std::string_view PriorityClassName(PriorityClass c) {
  switch (c) {
    case PriorityClass::kHigh: return "high";
    case PriorityClass::kNormal: return "normal";
    case PriorityClass::kBestEffort: return "best_effort";
  }
  return "unknown";
}

// The device time of one model version, over all its instances. Lives while the version has lanes: a version
// unloaded for good takes its series out of the exposition.
struct Lane::ModelStats {
  BusyTime busy;  // guarded by the multiplexer's mu_
  Gauge* ms_per_second = nullptr;
  Counter* seconds = nullptr;
  Counter* migrations = nullptr;
  std::pair<std::string, int64_t> key;  // in the multiplexer's models_
  Labels labels;                        // model, version, device
  int lanes = 0;                        // guarded by the multiplexer's mu_
};

// ---------------------------------------------------------------------------------------------------------------
// Lane

Lane::Lane(Multiplexer* mux, ModelInstance* instance, PriorityClass c, int max_inflight, std::unique_ptr<Event> moved,
           ModelStats* model, Counter* migrations)
    : mux_(mux),
      instance_(instance),
      class_(c),
      max_inflight_(max_inflight),
      moved_(std::move(moved)),
      model_(model),
      migrations_counter_(migrations),
      load_(mux->options_.load_time_constant) {}

Lane::~Lane() {
  {
    std::unique_lock lock(mu_);
    slot_free_.wait(lock, [this] { return slots_ == 0; });
  }
  std::lock_guard lock(mux_->mu_);
  mux_->StreamsOf(class_)[stream_]->instances--;
  mux_->lanes_--;
  if (--model_->lanes == 0) mux_->ForgetModelLocked(model_);
}

bool Lane::AcquireSlot(std::stop_token stop) {
  {
    std::unique_lock lock(mu_);
    if (!slot_free_.wait(lock, stop, [this] { return slots_ < max_inflight_; })) return false;
    ++slots_;
  }
  if (class_ == PriorityClass::kBestEffort && !mux_->AcquireBudget(stop)) {
    std::lock_guard lock(mu_);
    --slots_;
    slot_free_.notify_all();
    return false;
  }
  return true;
}

bool Lane::TryAcquireSlot() {
  {
    std::lock_guard lock(mu_);
    if (slots_ >= max_inflight_) return false;
    ++slots_;
  }
  if (class_ == PriorityClass::kBestEffort && !mux_->TryAcquireBudget()) {
    std::lock_guard lock(mu_);
    --slots_;
    slot_free_.notify_all();
    return false;
  }
  return true;
}

void Lane::ReleaseSlot() {
  if (class_ == PriorityClass::kBestEffort) mux_->ReleaseBudget();
  std::lock_guard lock(mu_);
  --slots_;
  slot_free_.notify_all();
}

void Lane::MaybeRebalanceLocked(SteadyTime now) {
  if (!mux_->options_.load_balance || mux_->options_.single_stream) return;
  if (now - last_balance_ < mux_->options_.balance_interval) return;
  last_balance_ = now;
  size_t best;
  {
    std::lock_guard lock(mux_->mu_);
    auto& streams = mux_->StreamsOf(class_);
    if (streams.size() < 2) return;
    // One move per class per interval: the others see its effect before they decide.
    SteadyTime& last_move = mux_->last_move_[static_cast<int>(class_)];
    if (now - last_move < mux_->options_.balance_interval) return;
    best = mux_->LeastLoadedLocked(class_, now);
    const double gap = streams[stream_]->load.At(now) - streams[best]->load.At(now);
    // Moving takes this instance's own load along: it evens the streams out only when that is less than the gap.
    if (best == stream_ || gap <= mux_->options_.balance_threshold || load_.At(now) >= gap) return;
    last_move = now;
  }
  MoveToLocked(best, now);
}

void Lane::MoveTo(size_t index) {
  std::lock_guard lock(mu_);
  MoveToLocked(index, std::chrono::steady_clock::now());
}

void Lane::MoveToLocked(size_t index, SteadyTime now) {
  {
    std::lock_guard lock(mux_->mu_);
    auto& streams = mux_->StreamsOf(class_);
    WEFT_CHECK(index < streams.size()) << "stream " << index << " of " << streams.size();
    if (index == stream_) return;
    streams[stream_]->instances--;
    streams[index]->instances++;
    const double own = load_.At(now);
    streams[stream_]->load.Shift(-own, now);
    streams[index]->load.Shift(own, now);
  }
  // The order of the instance's batches across the move is kept by Submit.
  stream_ = index;
  ++migrations_;
  migrations_counter_->Increment();
}

void Lane::Submit(std::vector<Tensor> inputs, BatchDone done, OnSubmitter on_submitter, bool background) {
  Multiplexer::PooledStream* pooled;
  {
    std::lock_guard lock(mu_);
    MaybeRebalanceLocked(std::chrono::steady_clock::now());
    {
      std::lock_guard mux_lock(mux_->mu_);
      pooled = background ? mux_->background_ : mux_->StreamsOf(class_)[stream_];
    }
    // Order per instance: a batch on another stream than the instance's previous one (after a move, or to or from
    // the background stream) starts after that one has finished.
    Stream* stream = pooled->stream.get();
    if (last_stream_ != nullptr && last_stream_ != stream) {
      last_stream_->Record(*moved_);
      stream->Wait(*moved_);
    }
    last_stream_ = stream;
  }
  struct State {
    Result<std::vector<Tensor>> outputs = Internal("the batch did not run");
  };
  auto state = std::make_shared<State>();
  Work work;
  work.keep_alive.reserve(inputs.size());
  for (const Tensor& t : inputs) work.keep_alive.push_back(t.owner());
  work.run = [instance = instance_, inputs = std::move(inputs), state](const NativeStream& native) {
    instance->SetStream(ToExecutionStream(native));
    state->outputs = instance->Execute(inputs);
    return state->outputs.ok() ? Status::Ok() : state->outputs.status();
  };
  const SteadyTime submitted = std::chrono::steady_clock::now();
  work.on_done = [this, pooled, state, submitted, background, done = std::move(done)](const Completion& completion) {
    mux_->OnBatchDone(pooled, this, submitted, completion, /*own_stream=*/!background);
    Result<std::vector<Tensor>> outputs = std::move(state->outputs);
    // A device error (a kernel fault) after a launch that went well replaces the outputs.
    if (!completion.status.ok() && outputs.ok()) outputs = completion.status;
    done(std::move(outputs), BatchTiming{completion.start, completion.end, &pooled->name, &mux_->device_->name()});
    ReleaseSlot();
  };
  work.may_run_on_caller = on_submitter != OnSubmitter::kNothing && !background;
  work.complete_on_caller = on_submitter == OnSubmitter::kRunAndComplete;
  pooled->queue_depth->Add(1);
  pooled->stream->Enqueue(std::move(work));
}

int Lane::inflight() const {
  std::lock_guard lock(mu_);
  return slots_;
}

std::string Lane::stream_name() const {
  std::lock_guard lock(mu_);
  std::lock_guard mux_lock(mux_->mu_);
  return mux_->StreamsOf(class_)[stream_]->name;
}

uint64_t Lane::migrations() const {
  std::lock_guard lock(mu_);
  return migrations_;
}

// ---------------------------------------------------------------------------------------------------------------
// Multiplexer

Result<std::unique_ptr<Multiplexer>> Multiplexer::Create(Device* device, MultiplexerOptions options,
                                                         MetricsRegistry* metrics) {
  if (options.streams_per_class < 1) {
    return InvalidArgument("the multiplexer needs at least 1 stream per class, got " +
                           std::to_string(options.streams_per_class));
  }
  std::unique_ptr<Multiplexer> mux(new Multiplexer(device, options, metrics));
  WEFT_RETURN_IF_ERROR(mux->CreateStreams());
  mux->metrics_thread_ = std::jthread([m = mux.get()](std::stop_token stop) {
    SetCurrentThreadName("busy-metrics");
    m->RefreshMetrics(stop);
  });
  return mux;
}

Multiplexer::Multiplexer(Device* device, MultiplexerOptions options, MetricsRegistry* metrics)
    : device_(device), options_(options), metrics_(metrics), device_busy_(options.busy_horizon) {
  const Labels labels{{"device", device_->name()}};
  device_busy_fraction_ = metrics_->GetGauge("weft_device_busy_fraction",
                                             "Union of all streams' busy intervals over the metrics window", labels);
  best_effort_inflight_gauge_ =
      metrics_->GetGauge("weft_best_effort_inflight", "Best-effort batches in flight on the device", labels);
}

Multiplexer::~Multiplexer() {
  {
    std::lock_guard lock(mu_);
    WEFT_CHECK(lanes_ == 0) << "the multiplexer is destroyed before " << lanes_ << " of its lanes";
  }
  metrics_thread_ = std::jthread();
  for (auto& s : streams_) s->stream->Synchronize();
  streams_.clear();
}

Status Multiplexer::CreateStreams() {
  auto add = [this](PriorityClass c, std::string name, StreamPriority priority, bool idle = false) -> Status {
    auto pooled = std::make_unique<PooledStream>(PooledStream{
        .stream = nullptr,
        .priority_class = c,
        .name = std::move(name),
        .load = StreamLoad(options_.load_time_constant),
        .busy = BusyTime(options_.busy_horizon),
    });
    WEFT_ASSIGN_OR_RETURN(pooled->stream,
                          device_->CreateStream({.name = pooled->name, .priority = priority, .idle = idle}));
    const Labels labels{{"device", device_->name()}, {"stream", pooled->name}};
    pooled->busy_fraction =
        metrics_->GetGauge("weft_stream_busy_fraction", "Busy time of the stream over the metrics window", labels);
    pooled->busy_seconds =
        metrics_->GetCounter("weft_stream_busy_seconds_total", "Seconds the stream had work running", labels);
    pooled->queue_depth = metrics_->GetGauge("weft_stream_queue_depth",
                                             "Batches submitted to the stream whose completion has not fired", labels);
    pooled->instance_count =
        metrics_->GetGauge("weft_stream_instances", "Model instances assigned to the stream", labels);
    pooled->load_gauge = metrics_->GetGauge(
        "weft_stream_load", "EWMA of the batches on the stream, waiting or running, that the balancer assigns by",
        labels);
    streams_.push_back(std::move(pooled));
    return Status::Ok();
  };
  if (options_.single_stream) {
    WEFT_RETURN_IF_ERROR(add(PriorityClass::kNormal, "shared/0", StreamPriority::kNormal));
    for (auto& list : by_class_) list.push_back(streams_.back().get());
    background_ = streams_.back().get();
  } else {
    for (PriorityClass c : {PriorityClass::kHigh, PriorityClass::kNormal, PriorityClass::kBestEffort}) {
      const StreamPriority priority = options_.stream_priorities ? DevicePriority(c) : StreamPriority::kNormal;
      for (int i = 0; i < options_.streams_per_class; ++i) {
        WEFT_RETURN_IF_ERROR(add(c, std::string(PriorityClassName(c)) + "/" + std::to_string(i), priority));
        by_class_[static_cast<int>(c)].push_back(streams_.back().get());
      }
    }
    WEFT_RETURN_IF_ERROR(add(PriorityClass::kBestEffort, "background", StreamPriority::kLow, /*idle=*/true));
    background_ = streams_.back().get();
  }
  WEFT_LOG(Info) << "multiplexer on " << device_->name() << ": "
                 << (options_.single_stream ? std::string("one shared stream")
                                            : std::to_string(options_.streams_per_class) + " streams per class") +
                        ", stream priorities " + (options_.stream_priorities ? "on" : "off") +
                        ", best-effort batches in flight per instance " +
                        (options_.best_effort_max_inflight > 0 ? std::to_string(options_.best_effort_max_inflight)
                                                               : std::string("unbounded")) +
                        ", best-effort budget " +
                        (options_.best_effort_budget > 0 ? std::to_string(options_.best_effort_budget)
                                                         : std::string("unbounded")) +
                        ", load balancing " + (options_.load_balance ? "on" : "off");
  return Status::Ok();
}

std::vector<Multiplexer::PooledStream*>& Multiplexer::StreamsOf(PriorityClass c) {
  return by_class_[static_cast<int>(c)];
}

size_t Multiplexer::LeastLoadedLocked(PriorityClass c, SteadyTime now) {
  auto& streams = StreamsOf(c);
  size_t best = 0;
  for (size_t i = 1; i < streams.size(); ++i) {
    const double a = streams[i]->load.At(now);
    const double b = streams[best]->load.At(now);
    if (a < b - 1e-9 || (a <= b + 1e-9 && streams[i]->instances < streams[best]->instances)) best = i;
  }
  return best;
}

Result<std::unique_ptr<Lane>> Multiplexer::AddInstance(const ModelConfig& config, int64_t version,
                                                       ModelInstance* instance) {
  const PriorityClass c = ClassOf(config.priority);
  WEFT_ASSIGN_OR_RETURN(int bound, MaxInflightOf(config, c, options_, device_->kind()));
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Event> event, device_->CreateEvent());
  const Labels labels{{"model", config.name}, {"version", std::to_string(version)}, {"device", device_->name()}};
  // Under mu_, like the removal of the series when the version's last lane goes: a lane of a new copy of the same
  // version never gets a series that is being removed.
  std::lock_guard lock(mu_);
  auto& stats = models_[{config.name, version}];
  if (!stats) {
    stats = std::make_unique<Lane::ModelStats>(Lane::ModelStats{.busy = BusyTime(options_.busy_horizon)});
    stats->ms_per_second = metrics_->GetGauge(kModelMsPerSecond,
                                              "Device milliseconds per second the model's batches kept busy "
                                              "(union of their busy intervals over the metrics window)",
                                              labels);
    stats->seconds = metrics_->GetCounter(kModelSeconds, "Device seconds the model's batches kept busy", labels);
    stats->migrations = metrics_->GetCounter(kMigrations, "Moves of the model's instances between streams", labels);
    stats->key = {config.name, version};
    stats->labels = labels;
  }
  ++stats->lanes;
  Counter* migrations = stats->migrations;
  std::unique_ptr<Lane> lane(new Lane(this, instance, c, bound, std::move(event), stats.get(), migrations));
  lane->stream_ = LeastLoadedLocked(c, std::chrono::steady_clock::now());
  StreamsOf(c)[lane->stream_]->instances++;
  ++lanes_;
  return lane;
}

void Multiplexer::ForgetModelLocked(Lane::ModelStats* stats) {
  for (const char* name : {kModelMsPerSecond, kModelSeconds, kMigrations}) metrics_->Remove(name, stats->labels);
  models_.erase(stats->key);
}

void Multiplexer::OnBatchDone(PooledStream* stream, Lane* lane, SteadyTime submitted, const Completion& completion,
                              bool own_stream) {
  Lane::ModelStats* model = lane->model_;
  stream->queue_depth->Add(-1);
  std::lock_guard lock(mu_);
  const double before = Seconds(stream->busy.total());
  stream->busy.Add(completion.start, completion.end);
  stream->busy_seconds->Increment(Seconds(stream->busy.total()) - before);
  // Load is the time each batch spent on the stream, waiting included: its average is the number of batches on the
  // stream (Little's law). Busy time alone reads 1 for every saturated stream, however many instances crowd it.
  const SteadyTime on_stream = std::min(submitted, completion.start);
  stream->load.Add(on_stream, completion.end);
  // The balancer weighs an instance by its load on its own stream; a background batch ran on another.
  if (own_stream) lane->load_.Add(on_stream, completion.end);
  device_busy_.Add(completion.start, completion.end);
  const double model_before = Seconds(model->busy.total());
  model->busy.Add(completion.start, completion.end);
  model->seconds->Increment(Seconds(model->busy.total()) - model_before);
}

bool Multiplexer::AcquireBudget(std::stop_token stop) {
  std::unique_lock lock(budget_mu_);
  if (options_.best_effort_budget > 0 &&
      !budget_free_.wait(lock, stop, [this] { return best_effort_inflight_ < options_.best_effort_budget; })) {
    return false;
  }
  ++best_effort_inflight_;
  best_effort_inflight_gauge_->Set(best_effort_inflight_);
  return true;
}

bool Multiplexer::TryAcquireBudget() {
  std::lock_guard lock(budget_mu_);
  if (options_.best_effort_budget > 0 && best_effort_inflight_ >= options_.best_effort_budget) return false;
  ++best_effort_inflight_;
  best_effort_inflight_gauge_->Set(best_effort_inflight_);
  return true;
}

void Multiplexer::ReleaseBudget() {
  {
    std::lock_guard lock(budget_mu_);
    --best_effort_inflight_;
    best_effort_inflight_gauge_->Set(best_effort_inflight_);
  }
  budget_free_.notify_all();
}

int Multiplexer::best_effort_inflight() const {
  std::lock_guard lock(budget_mu_);
  return best_effort_inflight_;
}

std::vector<Multiplexer::StreamStats> Multiplexer::Stats() const {
  const SteadyTime now = std::chrono::steady_clock::now();
  std::vector<StreamStats> out;
  std::lock_guard lock(mu_);
  for (const auto& s : streams_) {
    out.push_back({.name = s->name,
                   .priority_class = s->priority_class,
                   .load = s->load.At(now),
                   .busy_fraction = s->busy.Fraction(now - options_.metrics_window, now),
                   .queue_depth = s->stream->pending(),
                   .instances = s->instances});
  }
  return out;
}

double Multiplexer::BusyFraction(SteadyTime from, SteadyTime to) const {
  std::lock_guard lock(mu_);
  return device_busy_.Fraction(from, to);
}

double Multiplexer::ModelBusyFraction(const std::string& model, int64_t version, SteadyTime from, SteadyTime to) const {
  std::lock_guard lock(mu_);
  auto it = models_.find({model, version});
  return it == models_.end() ? 0 : it->second->busy.Fraction(from, to);
}

void Multiplexer::RefreshMetrics(std::stop_token stop) {
  while (SleepUnlessStopped(stop, options_.metrics_window / 2)) {
    const SteadyTime now = std::chrono::steady_clock::now();
    const SteadyTime from = now - options_.metrics_window;
    std::lock_guard lock(mu_);
    for (auto& s : streams_) {
      s->busy_fraction->Set(s->busy.Fraction(from, now));
      s->load_gauge->Set(s->load.At(now));
      s->instance_count->Set(s->instances);
    }
    device_busy_fraction_->Set(device_busy_.Fraction(from, now));
    for (auto& [key, stats] : models_) stats->ms_per_second->Set(1000.0 * stats->busy.Fraction(from, now));
  }
}

}  // namespace weft
