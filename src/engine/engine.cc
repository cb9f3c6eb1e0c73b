#include "engine/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <variant>

#include "base/log.h"
#include "base/thread_name.h"
#include "base/thread_priority.h"
#include "engine/request_validation.h"
#include "engine/version_guard.h"
#include "model/resilience_config.h"
#include "repository/repository_scan.h"
#include "rollout/output_compare.h"
#include "rollout/rollout_decision.h"
#include "scheduler/scheduler.h"

namespace weft {
namespace {

// An instance's multiplexer lane, as the scheduler's executor. The multiplexer knows no scheduler and the scheduler
// no multiplexer; the engine joins them here.
class LaneExecutor final : public InstanceExecutor {
 public:
  explicit LaneExecutor(std::unique_ptr<Lane> lane) : lane_(std::move(lane)) {}
  bool TryAcquireSlot() override { return lane_->TryAcquireSlot(); }
  bool AcquireSlot(std::stop_token stop) override { return lane_->AcquireSlot(stop); }
  void ReleaseSlot() override { lane_->ReleaseSlot(); }
  void Submit(std::vector<Tensor> inputs, ExecutionDone done, BatchHints hints) override {
    // The caller is the scheduler's instance thread, or a client's thread that borrowed the idle instance for a lone
    // request (Scheduler::Submit). The instance's next batch could not start before this one ends (an instance runs
    // one batch at a time), so the caller may as well run this one itself when the device would start it at once:
    // the hand-off to a device worker is saved. For a lone request it runs the completion too, which saves
    // the completion loop's wake-up (BatchHints::lone). Not a background batch: that one waits for idle capacity.
    lane_->Submit(
        std::move(inputs),
        [done = std::move(done)](Result<std::vector<Tensor>> outputs, const BatchTiming& timing) {
          done(std::move(outputs), ExecutionTiming{timing.start, timing.end, timing.stream, timing.device});
        },
        hints.lone ? OnSubmitter::kRunAndComplete : OnSubmitter::kRun, hints.background);
  }

 private:
  const std::unique_ptr<Lane> lane_;  // its destructor waits for the lane's batches in flight
};

// The versions the engine has started and not yet torn down. Shared with the deleters of the handles, which may run
// on any thread (the last request's answer) and after the engine is gone.
struct VersionRegistry {
  struct Entry {
    std::unique_ptr<ServingVersion> version;
    std::function<void()> on_unloaded;
  };
  std::mutex mu;
  std::condition_variable cv;
  uint64_t next_id = 1;            // guarded by mu
  std::map<uint64_t, Entry> live;  // guarded by mu
  std::vector<uint64_t> released;  // guarded by mu: ids whose last handle is gone, to tear down
  bool stopping = false;           // guarded by mu
  // Versions started or starting, by (model, version): a version's metric series go when its count drops to 0.
  // Counted before the scheduler takes its series, so that a new copy never gets a series being removed.
  std::map<std::pair<std::string, int64_t>, int> copies;  // guarded by mu
};

}  // namespace

struct ServingVersion::Parts {
  std::vector<std::unique_ptr<LaneExecutor>> executors;  // used by the scheduler, so destroyed after it
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<VersionGuard> guard;       // its circuit breaker
  std::vector<std::string> fallback_models;  // weft.fallback_models: who answers when this version cannot
  std::string degrade_to;                    // weft.degrade_to: who answers when this one would miss the deadline
};

namespace {

// A request on its way through its primary's fallback chain. Shared by the callbacks of its attempts, one at a time.
struct FallbackPlan {
  std::vector<std::string> chain;  // the primary's weft.fallback_models
  size_t next = 0;                 // the next one to try
  std::string primary_model;       // the model that should have answered
  std::string primary;             // "det/2": the version that should have answered
  std::string reason;              // why it did not: "circuit_open" or "server_error"
  Status cause;                    // its error, for the answer when no fallback can give one
  Counter* answers = nullptr;      // weft_fallback_answers_total of the fallback being tried
  // The request as the client sent it, kept while an attempt runs for the next fallback should it fail.
  std::unique_ptr<InferenceRequest> spare;
  bool Exhausted() const { return next >= chain.size(); }
};

// The two answers to one shadowed request: the primary's (first) and the candidate's, or the primary's again for
// the noise floor (second). Whichever arrives last compares them into the stage's figures; an error on either side
// leaves nothing to compare. Shared by the two completions.
class ShadowComparison {
 public:
  ShadowComparison(std::shared_ptr<StageRecorder> recorder, bool noise)
      : recorder_(std::move(recorder)), noise_(noise) {}

  void Arrive(bool first, const Result<std::vector<Tensor>>& outputs) {
    {
      std::lock_guard lock(mu_);
      if (!outputs.ok()) {
        failed_ = true;
      } else {
        (first ? first_ : second_) = *outputs;
      }
      if (--waiting_ > 0) return;
    }
    if (failed_) return;  // both have arrived: nothing else touches the fields now
    const Comparison comparison = CompareOutputs(first_, second_);
    if (noise_) {
      recorder_->RecordNoise(comparison);
    } else {
      recorder_->RecordComparison(comparison);
    }
  }

 private:
  const std::shared_ptr<StageRecorder> recorder_;
  const bool noise_;
  std::mutex mu_;
  int waiting_ = 2;            // guarded by mu_
  bool failed_ = false;        // guarded by mu_
  std::vector<Tensor> first_;  // guarded by mu_
  std::vector<Tensor> second_;
};

}  // namespace

ServingVersion::ServingVersion() = default;
ServingVersion::~ServingVersion() {
  // The scheduler first: it answers what is still queued and waits for executions in flight on the lanes.
  if (parts) parts->scheduler.reset();
}

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kReady: return "READY";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNAVAILABLE";
}

struct Engine::Impl {
  Options options;
  MetricsRegistry* metrics = nullptr;
  // Shared by every scheduler, so declared before (and destroyed after) them; null when unbounded.
  std::unique_ptr<ByteBudget> byte_budget;
  // Owns the streams every lane runs on: destroyed after the versions. Null without a device.
  std::unique_ptr<Multiplexer> multiplexer;
  Status device_status;  // why there is no multiplexer although a device was given

  std::shared_ptr<VersionRegistry> registry = std::make_shared<VersionRegistry>();
  // Read by every request (a copy of the pointer under table_mu, held for nothing else); replaced whole by writers,
  // who take publish_mu so that none loses another's change. A mutex rather than std::atomic<std::shared_ptr>:
  // libstdc++ 12 builds that on a lock bit in the pointer, which ThreadSanitizer cannot follow (it reports a race
  // on every publish), and the copy under an uncontended mutex costs about as much.
  mutable std::mutex table_mu;
  std::shared_ptr<const RoutingTable> table = std::make_shared<const RoutingTable>();  // guarded by table_mu
  std::mutex publish_mu;

  std::shared_ptr<const RoutingTable> LoadTable() const {
    std::lock_guard lock(table_mu);
    return table;
  }
  void StoreTable(std::shared_ptr<const RoutingTable> next) {
    std::lock_guard lock(table_mu);
    table.swap(next);  // the old table is released after the lock, outside it
  }
  std::vector<VersionHandle> fixed;  // the versions of the constructor's entries: in service for good
  std::jthread unloader;             // tears down released versions; started last, stopped first

  // Tears down every version whose last handle is gone, at a low priority: unloading frees a model's memory and
  // joins its threads, which is no work for a thread on the request path.
  void RunUnloader() {
    SetCurrentThreadNice(kBackgroundNice);
    std::unique_lock lock(registry->mu);
    for (;;) {
      registry->cv.wait(lock, [&] { return registry->stopping || !registry->released.empty(); });
      if (registry->released.empty()) return;  // stopping
      std::vector<uint64_t> ids;
      ids.swap(registry->released);
      std::vector<VersionRegistry::Entry> entries;
      for (uint64_t id : ids) {
        auto it = registry->live.find(id);
        if (it == registry->live.end()) continue;
        entries.push_back(std::move(it->second));
        registry->live.erase(it);
      }
      lock.unlock();
      for (auto& entry : entries) {
        std::pair<std::string, int64_t> key{entry.version->config().name, entry.version->version()};
        entry.version.reset();
        ReleaseCopy(key);
        if (entry.on_unloaded) entry.on_unloaded();
      }
      lock.lock();
    }
  }

  // The version that answers requests naming none: the route's default when it serves, else the highest. `serving`
  // must not be empty.
  static const VersionHandle& DefaultVersion(const ModelRoute& route) {
    if (route.default_version != 0) {
      auto it = route.serving.find(route.default_version);
      if (it != route.serving.end()) return it->second;
    }
    return route.serving.rbegin()->second;
  }

  // Finds (model, version) in `table`; version 0 = the default version.
  static Result<const VersionHandle*> Find(const RoutingTable& table, std::string_view model, int64_t version) {
    auto it = table.models.find(model);
    if (it == table.models.end()) return NotFound("unknown model '" + std::string(model) + "'");
    const ModelRoute& route = *it->second;
    if (version == 0) {
      if (route.serving.empty()) {
        return Unavailable("model '" + std::string(model) + "' is not ready: " + route.unavailable.message());
      }
      return &DefaultVersion(route);
    }
    auto v = route.serving.find(version);
    if (v != route.serving.end()) return &v->second;
    for (const VersionReport& report : route.versions) {
      if (report.version != version) continue;
      return Unavailable("version " + std::to_string(version) + " of model '" + std::string(model) +
                         "' is not ready (" + std::string(VersionStateName(report.state)) + ")" +
                         (report.reason.empty() ? "" : ": " + report.reason));
    }
    return NotFound("model '" + std::string(model) + "' has no version " + std::to_string(version));
  }

  // One copy of (model, version) fewer; with none left, its scheduler's series leave the exposition.
  void ReleaseCopy(const std::pair<std::string, int64_t>& key) {
    std::lock_guard lock(registry->mu);
    auto it = registry->copies.find(key);
    if (it == registry->copies.end() || --it->second > 0) return;
    registry->copies.erase(it);
    VersionMetrics::Remove(metrics, key.first, key.second);
    VersionGuard::RemoveSeries(metrics, key.first, key.second);
  }

  // Runs `request` on `version` when its breaker admits it. With a plan, a refusal or a server fault moves the
  // request on to the next fallback; a fallback that answers says so in the response's parameters.
  // A degraded request (`may_degrade` false) is not degraded again, so that two models naming each other do not
  // pass a request back and forth.
  // `from_client`: called on the thread that brought the client's request (Engine::Submit), which may then run the
  // batch itself (Scheduler::Work::caller_may_run); not for fallbacks (on a completion's thread), degraded requests
  // or shadow copies (the client's own request would wait behind a copy).
  void Attempt(VersionHandle version, std::unique_ptr<InferenceRequest> request, InferenceCallback on_done,
               std::shared_ptr<FallbackPlan> plan, bool may_degrade = true, bool from_client = false) {
    ServingVersion::Parts& parts = *version->parts;
    Scheduler& scheduler = *parts.scheduler;
    const bool fallback = plan && plan->next > 0;
    if (may_degrade && !fallback && !parts.degrade_to.empty() && request->deadline) {
      if (std::optional<VersionHandle> cheaper = DegradeTarget(*version, *request)) {
        return Degrade(*version, *std::move(cheaper), std::move(request), std::move(on_done));
      }
    }
    VersionGuard::Admission admission = parts.guard->Admit(std::chrono::steady_clock::now());
    if (!admission.refused.ok()) {
      if (plan && !fallback) {
        plan->reason = "circuit_open";
        plan->cause = admission.refused;
      }
      if (plan) return FallBack(std::move(request), std::move(on_done), std::move(plan));
      Complete(scheduler.metrics(), *request, on_done, admission.refused);
      return;
    }
    auto inputs = PrepareInputs(scheduler.config(), *request);
    if (!inputs.ok()) {
      parts.guard->Record(Status(), admission.probe, std::chrono::steady_clock::now());
      // The primary's own check is the client's error. A fallback checks what its primary accepted: its config
      // changed since, and it cannot answer this one.
      if (fallback) return FallBack(std::move(request), std::move(on_done), std::move(plan));
      Complete(scheduler.metrics(), *request, on_done, inputs.status());
      return;
    }
    // What the next fallback will need, should this attempt fail: the request as the client sent it.
    if (plan && !plan->Exhausted()) plan->spare = std::make_unique<InferenceRequest>(*request);
    // The answer holds a handle of its own; `version` stays held until this returns, because the request may be
    // answered (and its handle dropped, the version's last) before the scheduler is done with Submit.
    const bool caller_may_run = from_client && !fallback && !request->background;
    scheduler.Submit({.request = std::move(request),
                      .inputs = std::move(inputs).value(),
                      .on_done =
                          [this, version, probe = admission.probe, plan,
                           on_done = std::move(on_done)](Result<InferenceResponse> result) mutable {
                            version->parts->guard->Record(result.status(), probe, std::chrono::steady_clock::now());
                            if (plan && ClassifyForBreaker(result.status()) == CallOutcome::kFailure) {
                              if (plan->next == 0) {
                                plan->reason = "server_error";
                                plan->cause = result.status();
                              }
                              if (plan->spare) {
                                std::unique_ptr<InferenceRequest> request = std::move(plan->spare);
                                return FallBack(std::move(request), std::move(on_done), std::move(plan));
                              }
                              return on_done(NoFallbackLeft(*plan));
                            }
                            if (result.ok() && plan && plan->next > 0) {
                              result->parameters["weft_fallback_from"] = plan->primary;
                              result->parameters["weft_fallback_reason"] = plan->reason;
                              plan->answers->Increment();
                            }
                            on_done(std::move(result));
                          },
                      .caller_may_run = caller_may_run});
  }

  // weft.degrade_to's model when `version` would answer `request` after its deadline (the expected latency its
  // scheduler measures) and that model serves; nullopt otherwise.
  std::optional<VersionHandle> DegradeTarget(const ServingVersion& version, const InferenceRequest& request) const {
    const std::chrono::nanoseconds expected = version.parts->scheduler->ExpectedLatency();
    if (expected.count() <= 0 || std::chrono::steady_clock::now() + expected <= *request.deadline) return std::nullopt;
    std::shared_ptr<const RoutingTable> table = LoadTable();
    auto found = Find(*table, version.parts->degrade_to, 0);
    if (!found.ok()) return std::nullopt;
    return **found;
  }

  // Runs `request` on `cheaper` instead of `version`; the answer says so in its parameters.
  void Degrade(const ServingVersion& version, VersionHandle cheaper, std::unique_ptr<InferenceRequest> request,
               InferenceCallback on_done) {
    Counter* degraded = metrics->GetCounter("weft_degraded_answers_total",
                                            "Requests a cheaper model answered because the model asked for would have "
                                            "missed their deadline.",
                                            {{"model", version.config().name}, {"to", version.parts->degrade_to}});
    std::string from = version.config().name + "/" + std::to_string(version.version());
    request->model_name = version.parts->degrade_to;
    request->model_version = 0;
    Attempt(
        std::move(cheaper), std::move(request),
        [on_done = std::move(on_done), from = std::move(from), degraded](Result<InferenceResponse> result) {
          if (result.ok()) {
            result->parameters["weft_degraded_from"] = from;
            degraded->Increment();
          }
          on_done(std::move(result));
        },
        nullptr, /*may_degrade=*/false);
  }

  // Moves `request` to the first fallback left in the plan that serves; none left: the primary's error, as 503.
  void FallBack(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done,
                std::shared_ptr<FallbackPlan> plan) {
    std::shared_ptr<const RoutingTable> table = LoadTable();
    while (!plan->Exhausted()) {
      const std::string& name = plan->chain[plan->next++];
      auto found = Find(*table, name, 0);
      if (!found.ok()) continue;
      VersionHandle version = **found;
      request->model_name = name;
      request->model_version = 0;
      plan->answers = metrics->GetCounter(
          "weft_fallback_answers_total", "Requests a fallback model answered for the model that should have.",
          {{"model", plan->primary_model}, {"fallback", name}, {"reason", plan->reason}});
      table.reset();
      return Attempt(std::move(version), std::move(request), std::move(on_done), std::move(plan));
    }
    on_done(NoFallbackLeft(*plan));
  }

  // The answer when neither the primary nor a fallback could give one: 503, retry later (when the primary's breaker
  // said how long it stays open, that long).
  static Status NoFallbackLeft(const FallbackPlan& plan) {
    const std::chrono::milliseconds after =
        plan.cause.retry_after().count() > 0 ? plan.cause.retry_after() : std::chrono::milliseconds(1000);
    return Unavailable("model '" + plan.primary + "' could not answer (" + plan.cause.ToString() +
                       ") and no fallback could either (" + std::to_string(plan.chain.size()) + " tried)")
        .WithRetryAfter(after);
  }

  // Picks the arm of a request in a rollout (the candidate for a canary's share, else the primary), wraps `on_done`
  // to record the arm's answer in the stage's figures, and sends a shadow copy of a primary request to the candidate
  // when the stage asks for one and the candidate has room. Returns the version that answers.
  VersionHandle RouteInRollout(std::shared_ptr<const RolloutRoute> rollout, const VersionHandle& primary,
                               const VersionHandle& candidate, const std::unique_ptr<InferenceRequest>& request,
                               InferenceCallback& on_done) {
    const RolloutRoute& r = *rollout;
    std::optional<uint64_t> sticky = StickyHash(*request, r.sticky_key);
    const bool canary = r.canary_share > 0 && ToCandidate(r.canary_share, sticky ? &*sticky : nullptr, NextDraw());
    const RolloutArm arm = canary ? RolloutArm::kCandidate : RolloutArm::kPrimary;
    std::shared_ptr<ShadowComparison> shadow, noise;
    if (!canary && r.shadow_share > 0 && ToCandidate(r.shadow_share, nullptr, NextDraw())) {
      if (r.recorder->TryStartShadow()) {
        if (r.shadow_sent) r.shadow_sent->Increment();
        shadow = std::make_shared<ShadowComparison>(r.recorder, /*noise=*/false);
        SendShadow(rollout, candidate, RolloutArm::kCandidate, *request, shadow);
        if (r.recorder->WantNoiseSample()) {
          noise = std::make_shared<ShadowComparison>(r.recorder, /*noise=*/true);
          SendShadow(rollout, primary, RolloutArm::kPrimary, *request, noise);
        }
      } else if (r.shadow_dropped) {
        r.shadow_dropped->Increment();
      }
    }
    on_done = [rollout = std::move(rollout), arm, shadow = std::move(shadow), noise = std::move(noise),
               start = std::chrono::steady_clock::now(),
               on_done = std::move(on_done)](Result<InferenceResponse> result) mutable {
      RecordArm(*rollout, arm, result.status(), std::chrono::steady_clock::now() - start);
      if (!shadow) return on_done(std::move(result));
      // The outputs share their bytes: copying them costs a few pointers, and the client is answered before any
      // comparison runs.
      Result<std::vector<Tensor>> outputs =
          result.ok() ? Result<std::vector<Tensor>>(result->outputs) : Result<std::vector<Tensor>>(result.status());
      on_done(std::move(result));
      if (noise) noise->Arrive(/*first=*/true, outputs);
      shadow->Arrive(/*first=*/true, outputs);
    };
    return canary ? candidate : primary;
  }

  // A copy of `request` for `target` at its lowest priority, with no deadline and a cancellation of its own (the
  // client does not wait for it), the candidate's in the background (on capacity nothing else wants, when it does
  // not join a batch of requests that answer clients): its answer goes to `comparison` and is dropped. A candidate's
  // copy counts in the candidate's figures and releases its place among the shadow copies in flight.
  void SendShadow(const std::shared_ptr<const RolloutRoute>& rollout, const VersionHandle& target, RolloutArm arm,
                  const InferenceRequest& request, std::shared_ptr<ShadowComparison> comparison) {
    auto copy = std::make_unique<InferenceRequest>(request);
    copy->trace.reset();  // the client's trace ends with the client's answer
    copy->cancel = std::make_shared<CancelToken>();
    copy->deadline.reset();
    const std::optional<DynamicBatchingConfig>& batching = target->config().dynamic_batching;
    copy->priority = batching ? batching->priority_levels : 0;  // the lowest level; 0 = the default of one level
    copy->arrival = std::chrono::steady_clock::now();
    // Not the primary's copies (the noise floor's few): a background batch holds its instance until the idle worker
    // has run it, and the primary's instances answer clients.
    copy->background = arm == RolloutArm::kCandidate;
    Attempt(
        target, std::move(copy),
        [rollout, arm, comparison = std::move(comparison),
         start = std::chrono::steady_clock::now()](Result<InferenceResponse> result) {
          if (arm == RolloutArm::kCandidate) {
            RecordArm(*rollout, arm, result.status(), std::chrono::steady_clock::now() - start);
            rollout->recorder->FinishShadow();
          }
          comparison->Arrive(/*first=*/false, result.ok() ? Result<std::vector<Tensor>>(std::move(result->outputs))
                                                          : Result<std::vector<Tensor>>(result.status()));
        },
        nullptr, /*may_degrade=*/false);
  }

  static void RecordArm(const RolloutRoute& rollout, RolloutArm arm, const Status& status,
                        std::chrono::nanoseconds latency) {
    // Every error counts but a cancellation (the client went away) and a superseded frame: the criterion is the
    // increase over the primary on the same traffic, so errors the client causes weigh on both arms alike, while a
    // candidate that rejects inputs the primary takes (TorchScript reports its exceptions as INVALID_ARGUMENT), fails
    // them, or is refused by its breaker or a full queue shows.
    if (status.code() == StatusCode::kCancelled || status.code() == StatusCode::kAborted) return;
    const bool error = !status.ok();
    rollout.recorder->RecordAnswer(arm, error, latency);
    const size_t i = arm == RolloutArm::kPrimary ? 0 : 1;
    if (rollout.answers[i]) rollout.answers[i]->Increment();
    if (error && rollout.errors[i]) rollout.errors[i]->Increment();
  }

  // A hash of the request's sticky parameter, or nullopt when the rollout has none or the request lacks it.
  static std::optional<uint64_t> StickyHash(const InferenceRequest& request, const std::string& key) {
    if (key.empty()) return std::nullopt;
    auto it = request.parameters.find(key);
    if (it == request.parameters.end()) return std::nullopt;
    const std::string text = std::visit(
        [](const auto& v) -> std::string {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>)
            return v;
          else if constexpr (std::is_same_v<T, bool>)
            return v ? "true" : "false";
          else
            return std::to_string(v);
        },
        it->second);
    return Fnv1a(text.data(), text.size());
  }

  // A uniform draw per call, from a generator per thread (no lock on the request path).
  static uint64_t NextDraw() {
    thread_local uint64_t state = std::random_device{}() | (uint64_t{std::random_device{}()} << 32) | 1;
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
  }

  void Publish(const std::function<void(RoutingTable&)>& change) {
    std::lock_guard lock(publish_mu);
    auto next = std::make_shared<RoutingTable>(*LoadTable());
    change(*next);
    StoreTable(std::move(next));
  }
};

Engine::Engine(Options options, MetricsRegistry* metrics) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->metrics = metrics;
  if (options.max_queued_bytes > 0) impl_->byte_budget = std::make_unique<ByteBudget>(options.max_queued_bytes);
  if (options.device) {
    auto multiplexer = Multiplexer::Create(options.device, options.multiplexer, metrics);
    if (multiplexer.ok()) {
      impl_->multiplexer = std::move(multiplexer).value();
    } else {
      impl_->device_status = multiplexer.status().WithContext("device " + options.device->name());
      WEFT_LOG(Error) << impl_->device_status.message();
    }
  }
  impl_->unloader = std::jthread([impl = impl_.get()] {
    SetCurrentThreadName("unloader");
    impl->RunUnloader();
  });
}

Engine::Engine(std::vector<ModelEntry> models, Options options, MetricsRegistry* metrics) : Engine(options, metrics) {
  for (auto& entry : models) {
    auto route = std::make_shared<ModelRoute>();
    if (entry.config) route->config = std::make_shared<const ModelConfig>(*entry.config);
    for (auto& loaded : entry.versions) {
      const int64_t version = loaded->version;
      Result<VersionHandle> handle = StartVersion(loaded);
      if (!handle.ok()) {
        WEFT_LOG(Error) << "model '" << entry.name << "' version " << version << ": " << handle.status().message();
        entry.failed_versions.emplace_back(version, handle.status());
        continue;
      }
      impl_->fixed.push_back(*handle);
      route->serving[version] = *std::move(handle);
    }
    for (const auto& [version, handle] : route->serving) {
      route->versions.push_back({version, VersionState::kReady, ""});
    }
    for (const auto& [version, status] : entry.failed_versions) {
      route->versions.push_back({version, VersionState::kUnavailable, status.message()});
    }
    std::sort(route->versions.begin(), route->versions.end(),
              [](const VersionReport& a, const VersionReport& b) { return a.version < b.version; });
    route->state = route->serving.empty() ? VersionState::kUnavailable : VersionState::kReady;
    if (route->serving.empty()) {
      route->failed = true;
      route->unavailable = !entry.status.ok()               ? entry.status
                           : !entry.failed_versions.empty() ? entry.failed_versions.back().second
                                                            : Unavailable("no version loaded");
    }
    PublishModel(entry.name, std::move(route));
  }
}

Engine::~Engine() {
  impl_->StoreTable(std::make_shared<const RoutingTable>());
  impl_->fixed.clear();
  {
    std::lock_guard lock(impl_->registry->mu);
    impl_->registry->stopping = true;
  }
  impl_->registry->cv.notify_all();
  impl_->unloader = std::jthread();  // joins once it has torn down what was released
  // What is left is still held by requests (or by a caller that broke the contract). Tearing it down answers the
  // queued requests UNAVAILABLE and waits for executions in flight; the handles they drop only mark their version
  // released in the registry, which outlives this.
  std::map<uint64_t, VersionRegistry::Entry> left;
  {
    std::lock_guard lock(impl_->registry->mu);
    left.swap(impl_->registry->live);
  }
  left.clear();
}

Result<VersionHandle> Engine::StartVersion(std::shared_ptr<LoadedVersion> loaded, std::function<void()> on_unloaded) {
  if (!impl_->device_status.ok()) return impl_->device_status;
  const ModelConfig& config = loaded->config;
  const std::pair<std::string, int64_t> key{config.name, loaded->version};
  {
    std::lock_guard lock(impl_->registry->mu);
    ++impl_->registry->copies[key];
  }
  Result<VersionHandle> handle = StartCopy(std::move(loaded), std::move(on_unloaded));
  if (!handle.ok()) impl_->ReleaseCopy(key);
  return handle;
}

Result<VersionHandle> Engine::StartCopy(std::shared_ptr<LoadedVersion> loaded, std::function<void()> on_unloaded) {
  const ModelConfig& config = loaded->config;
  auto version = std::make_unique<ServingVersion>();
  version->loaded = loaded;
  version->parts = std::make_unique<ServingVersion::Parts>();
  ServingVersion::Parts& parts = *version->parts;
  std::vector<ModelInstance*> instances;
  for (auto& instance : loaded->instances) instances.push_back(instance.get());
  if (impl_->multiplexer) {
    for (ModelInstance* instance : instances) {
      WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Lane> lane,
                            impl_->multiplexer->AddInstance(config, loaded->version, instance));
      parts.executors.push_back(std::make_unique<LaneExecutor>(std::move(lane)));
    }
  }
  std::vector<InstanceExecutor*> executors;
  for (auto& e : parts.executors) executors.push_back(e.get());
  const Options& options = impl_->options;
  Scheduler::Options scheduler_options{
      .version = loaded->version,
      .max_queue = options.max_queue_per_model != Options::kDefaultQueueBound ? options.max_queue_per_model
                   : ConfigBoundsQueue(config)                                ? 0
                                                                              : DefaultQueueBound(config),
      .byte_budget = impl_->byte_budget.get(),
      .finish_outputs =
          [loaded = loaded.get()](const InferenceRequest& request, std::vector<Tensor> outputs, int64_t batch_size) {
            return FinishOutputs(loaded->config, loaded->labels, request, std::move(outputs), batch_size);
          },
      .executors = std::move(executors),
  };
  WEFT_ASSIGN_OR_RETURN(ResilienceConfig resilience, ParseResilienceConfig(config));
  if (options.device) scheduler_options.on_out_of_memory = [device = options.device] { device->ReleaseCachedMemory(); };
  scheduler_options.execution_timeout = resilience.execution_timeout;
  WEFT_ASSIGN_OR_RETURN(const bool run_on_caller, RunOnCallerEnabled(config));
  scheduler_options.callers_run_lone_requests = run_on_caller && resilience.execution_timeout.count() == 0 &&
                                                (!options.device || options.device->kind() == DeviceKind::kCpu);
  WEFT_ASSIGN_OR_RETURN(const bool batch_tuning, BatchTuningEnabled(config));
  if (batch_tuning) scheduler_options.batch_tuning = BatchTunerOptions{};
  if (resilience.execution_timeout.count() > 0 && loaded->backend) {
    // A fresh instance in place of one quarantined after an execution overran, with a lane of its own. The
    // scheduler owns what this makes and destroys it before `loaded` and the multiplexer.
    scheduler_options.replace_instance =
        [loaded = loaded.get(), multiplexer = impl_->multiplexer.get()](size_t index) -> Result<InstanceReplacement> {
      InstanceReplacement replacement;
      WEFT_ASSIGN_OR_RETURN(replacement.instance,
                            loaded->backend->CreateInstance(loaded->config, loaded->dir, static_cast<int>(index)));
      if (multiplexer) {
        WEFT_ASSIGN_OR_RETURN(std::unique_ptr<Lane> lane,
                              multiplexer->AddInstance(loaded->config, loaded->version, replacement.instance.get()));
        replacement.executor = std::make_unique<LaneExecutor>(std::move(lane));
      }
      return replacement;
    };
  }
  WEFT_ASSIGN_OR_RETURN(parts.scheduler,
                        Scheduler::Create(config, std::move(instances), std::move(scheduler_options), impl_->metrics));
  parts.guard = std::make_unique<VersionGuard>(config.name, loaded->version, resilience.breaker, impl_->metrics);
  parts.fallback_models = std::move(resilience.fallback_models);
  parts.degrade_to = std::move(resilience.degrade_to);

  // The handle does not own the version: its deleter hands it to the unload thread, so that the thread that drops
  // the last handle (an answer's, on a completion thread) never joins the threads of the version it runs on.
  ServingVersion* raw = version.get();
  uint64_t id = 0;
  {
    std::lock_guard lock(impl_->registry->mu);
    id = impl_->registry->next_id++;
    impl_->registry->live.emplace(id, VersionRegistry::Entry{std::move(version), std::move(on_unloaded)});
  }
  return VersionHandle(raw, [registry = impl_->registry, id](const ServingVersion*) {
    {
      std::lock_guard lock(registry->mu);
      registry->released.push_back(id);
    }
    registry->cv.notify_all();
  });
}

void Engine::PublishModel(const std::string& name, std::shared_ptr<const ModelRoute> route) {
  impl_->Publish([&](RoutingTable& table) { table.models[name] = std::move(route); });
}

void Engine::RemoveModel(const std::string& name) {
  impl_->Publish([&](RoutingTable& table) { table.models.erase(name); });
}

std::shared_ptr<const RoutingTable> Engine::Table() const { return impl_->LoadTable(); }

void Engine::Submit(std::unique_ptr<InferenceRequest> request, InferenceCallback on_done) {
  if (request->trace) {
    request->trace->SetRequest(request->id, request->priority);
    on_done = [trace = request->trace, on_done = std::move(on_done)](Result<InferenceResponse> result) {
      trace->Stamp(TraceStage::kRequestEnd);
      if (result.ok()) trace->SetModel(result->model_name, result->model_version);
      trace->SetOutcome(result.status());
      on_done(std::move(result));
    };
  }
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  auto found = Impl::Find(*table, request->model_name, request->model_version);
  if (!found.ok()) {
    on_done(found.status());
    return;
  }
  VersionHandle version = **found;
  if (request->model_version == 0) {
    const ModelRoute& route = *table->models.find(request->model_name)->second;
    if (route.rollout) {
      auto primary = route.serving.find(route.rollout->primary);
      auto candidate = route.serving.find(route.rollout->candidate);
      if (primary != route.serving.end() && candidate != route.serving.end()) {
        version = impl_->RouteInRollout(route.rollout, primary->second, candidate->second, request, on_done);
      }
    }
  }
  table.reset();
  std::shared_ptr<FallbackPlan> plan;
  if (!version->parts->fallback_models.empty()) {
    plan = std::make_shared<FallbackPlan>();
    plan->chain = version->parts->fallback_models;
    plan->primary_model = version->config().name;
    plan->primary = version->config().name + "/" + std::to_string(version->version());
  }
  impl_->Attempt(std::move(version), std::move(request), std::move(on_done), std::move(plan), /*may_degrade=*/true,
                 /*from_client=*/true);
}

Result<std::shared_ptr<const LoadedVersion>> Engine::FindVersion(const std::string& model, int64_t version) const {
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  WEFT_ASSIGN_OR_RETURN(const VersionHandle* handle, Impl::Find(*table, model, version));
  return std::shared_ptr<const LoadedVersion>((*handle)->loaded);
}

Result<ModelConfig> Engine::FindConfig(const std::string& model) const {
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  auto it = table->models.find(model);
  if (it == table->models.end()) return NotFound("unknown model '" + model + "'");
  const ModelRoute& route = *it->second;
  if (!route.serving.empty()) return Impl::DefaultVersion(route)->config();
  if (!route.config) {
    return Unavailable("model '" + model + "' has no valid configuration: " + route.unavailable.message());
  }
  return *route.config;
}

std::vector<int64_t> Engine::ReadyVersions(const std::string& model) const {
  std::vector<int64_t> out;
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  auto it = table->models.find(model);
  if (it == table->models.end()) return out;
  for (const auto& [v, handle] : it->second->serving) out.push_back(v);
  return out;
}

bool Engine::Ready() const {
  if (!impl_->options.strict_readiness) return true;
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  for (const auto& [name, route] : table->models) {
    if (route->failed) return false;
  }
  return true;
}

Multiplexer* Engine::multiplexer() const { return impl_->multiplexer.get(); }

Result<std::vector<VersionStatistics>> Engine::Statistics(const std::string& model, int64_t version) const {
  if (model.empty() && version != 0) return InvalidArgument("a version needs a model name");
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  std::vector<VersionStatistics> out;
  auto add = [&](const std::string& name, const ServingVersion& serving) {
    out.push_back(ReadVersionStatistics(impl_->metrics, name, serving.version()));
    out.back().batch_stats = serving.parts->scheduler->ExecutionsByBatchSize();
  };
  if (model.empty()) {
    for (const auto& [name, route] : table->models) {
      for (const auto& [v, handle] : route->serving) add(name, *handle);
    }
    return out;
  }
  if (version != 0) {
    WEFT_ASSIGN_OR_RETURN(const VersionHandle* handle, Impl::Find(*table, model, version));
    add(model, **handle);
    return out;
  }
  auto route = table->models.find(model);
  if (route == table->models.end() || route->second->serving.empty()) {
    return Impl::Find(*table, model, 0).status();  // NotFound or Unavailable
  }
  for (const auto& [v, handle] : route->second->serving) add(model, *handle);
  return out;
}

std::vector<ModelState> Engine::States() const {
  std::vector<ModelState> out;
  std::shared_ptr<const RoutingTable> table = impl_->LoadTable();
  for (const auto& [name, route] : table->models) {
    if (route->serving.empty()) out.push_back({name, 0, false, route->unavailable.message()});
    for (const VersionReport& report : route->versions) {
      out.push_back({name, report.version, report.state == VersionState::kReady, report.reason});
    }
  }
  return out;
}

}  // namespace weft
