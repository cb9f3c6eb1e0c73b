#include "scheduler/scheduler.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>
#include <system_error>

#include "base/log.h"
#include "base/thread_name.h"
#include "scheduler/batch_tensors.h"
#include "scheduler/caller_run.h"
#include "trace/trace_context.h"

namespace weft {
namespace {

double Seconds(SteadyTime::duration d) { return std::chrono::duration<double>(d).count(); }
int64_t MicrosOf(SteadyTime::duration d) { return std::chrono::duration_cast<Micros>(d).count(); }

// The batch tuner of a version, when `tuning` asks for one and the policy batches (Options::batch_tuning).
std::optional<BatchTuner> MakeBatchTuner(const std::optional<BatchTunerOptions>& tuning,
                                         const BatchPolicyOptions& policy) {
  if (!tuning || !policy.dynamic_batching || policy.max_batch_size < 2) return std::nullopt;
  BatchTunerOptions options = *tuning;
  options.max_batch_size = policy.max_batch_size;
  return BatchTuner(options);
}

}  // namespace

Scheduler::Scheduler(ModelConfig config, std::vector<ModelInstance*> instances, Options options,
                     MetricsRegistry* metrics)
    : config_(std::move(config)),
      options_(std::move(options)),
      batch_policy_(BatchPolicyOptions::FromConfig(config_)),
      instance_count_(instances.size()),
      queue_options_(QueueOptions::FromConfig(config_, options_.max_queue)),
      metrics_(metrics, config_.name, options_.version, static_cast<uint32_t>(queue_options_.levels.size())),
      queue_(queue_options_),
      reported_depth_(queue_options_.levels.size(), 0),
      instances_(instance_count_),
      serving_(instance_count_),
      preserve_ordering_(config_.dynamic_batching && config_.dynamic_batching->preserve_ordering),
      tuner_(MakeBatchTuner(options_.batch_tuning, batch_policy_)) {
  std::vector<InstanceExecutor*> executors = options_.executors;
  if (executors.empty()) {
    for (ModelInstance* instance : instances) {
      inline_executors_.push_back(std::make_unique<InlineExecutor>(instance));
      executors.push_back(inline_executors_.back().get());
    }
  }
  WEFT_CHECK(executors.size() == instances.size()) << "model '" << config_.name << "': " << executors.size()
                                                   << " executors for " << instances.size() << " instances";
  std::lock_guard lock(mu_);
  if (tuner_) metrics_.tuned_batch_cap->Set(static_cast<double>(tuner_->chosen()));
  for (size_t i = 0; i < executors.size(); ++i) {
    instances_[i].number = i;
    instances_[i].executor = executors[i];
    threads_.emplace_back([this, i, executor = executors[i]](std::stop_token stop) {
      SetCurrentThreadName("i:" + config_.name);
      Serve(stop, i, executor);
    });
  }
  threads_.emplace_back([this](std::stop_token stop) {
    SetCurrentThreadName("t:" + config_.name);
    RunTimer(stop);
  });
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(ModelConfig config, std::vector<ModelInstance*> instances,
                                                     Options options, MetricsRegistry* metrics) {
  const std::string name = config.name;
  const size_t threads = instances.size() + 1;
  try {
    return std::make_unique<Scheduler>(std::move(config), std::move(instances), std::move(options), metrics);
  } catch (const std::system_error& e) {
    // The threads started before the failure are joined as the half-built scheduler unwinds (threads_ is
    // destroyed first); no request has reached it.
    return Unavailable("cannot start the " + std::to_string(threads) + " scheduler threads of model '" + name +
                       "': " + e.what());
  }
}

Scheduler::~Scheduler() {
  Entries left;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    left = queue_.TakeAll();
    QueueChangedLocked();
    // Halves waiting for their retry are answered like queued requests. None can be added from here on: an
    // execution that runs out of memory now answers its own requests (RetryAfterOutOfMemory).
    for (InstanceState& state : instances_) {
      for (Entries& half : state.retries) std::move(half.begin(), half.end(), std::back_inserter(left));
      state.retries.clear();
    }
  }
  for (auto& e : left) Answer(*e, Unavailable("the server is shutting down"));
  left.clear();
  // Stopping wakes the waiting threads; an instance in an execution finishes and answers it first. With stopping_
  // set no thread is added (a replacement being created is dropped), so these are all of them.
  std::vector<std::jthread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  threads.clear();
  {
    // Executions submitted to a device answer from its completion thread.
    std::unique_lock lock(mu_);
    inflight_done_.wait(lock, [this] { return inflight_ == 0; });
    // A copy of the version that goes away stops reporting its cap (during a swap the series is shared with the
    // next copy, whose instances start uncapped).
    if (reported_cap_ != 0) metrics_.oom_batch_cap->Set(0);
  }
  Entries cancelled;
  {
    std::lock_guard lock(mu_);
    cancelled.swap(cancelled_);
  }
  for (auto& e : cancelled) Answer(*e, Cancelled("the client went away while the request was queued"));
  // Every admitted request has been answered, so nothing can be held. Were one missing, the ones held behind it
  // would wait for ever: answer them anyway, and say so.
  std::map<uint64_t, HeldAnswer> stranded;
  {
    std::lock_guard lock(order_mu_);
    stranded.swap(held_);
  }
  if (!stranded.empty()) {
    WEFT_LOG(Error) << "model '" << config_.name << "': " << stranded.size()
                    << " answers held for preserve_ordering behind one that never came";
  }
  for (auto& [order, h] : stranded) Complete(metrics_, *h.request, h.on_done, std::move(h.result));
}

void Scheduler::Submit(Work work) {
  const SteadyTime now = std::chrono::steady_clock::now();
  auto entry = std::make_unique<QueueEntry>();
  entry->id = next_id_.fetch_add(1, std::memory_order_relaxed);
  entry->request = std::move(work.request);
  entry->inputs = std::move(work.inputs);
  entry->on_done = std::move(work.on_done);
  entry->enqueued = now;
  if (RequestTrace* trace = entry->request->trace.get()) trace->Stamp(TraceStage::kQueueStart, now);
  entry->batch_size = BatchSize(config_, entry->inputs);
  if (batch_policy_.dynamic_batching) {
    // Inputs that cannot be joined get a key no other request has.
    std::optional<std::string> key = BatchKeyOf(entry->inputs);
    entry->batch_key = key ? std::move(*key) : "alone:" + std::to_string(entry->id);
  }
  if (queue_options_.latest_frame_wins) entry->source = SourceOf(*entry->request);
  // Registered before the entry is queued: a cancel that fires in between finds nothing to remove, and then
  // AdmitLocked sees the token cancelled.
  entry->cancel_registration = entry->request->cancel->OnCancel([this, id = entry->id] { OnCancelled(id); });

  std::unique_ptr<QueueEntry> superseded;
  bool wake_timer = false;
  Status status;
  std::optional<size_t> lent;  // the instance this thread runs the request on itself
  Entries batch;
  bool some_lent = false;
  {
    std::lock_guard lock(mu_);
    status = AdmitLocked(entry, now, &superseded, &wake_timer);
    if (status.ok() && work.caller_may_run && options_.callers_run_lone_requests) {
      lent = LendIdleInstanceLocked(now, &batch);
    }
    some_lent = lent_ > 0;
  }
  if (!status.ok()) {
    Answer(*entry, std::move(status));
    return;  // `entry` (and its cancel registration) dies here, outside the lock
  }
  if (superseded) {
    Answer(*superseded, Aborted("superseded by a newer frame"));
  }
  if (!lent) {
    // A lent instance's thread waits for its instance back and would swallow a single wake-up.
    if (some_lent) {
      work_changed_.notify_all();
    } else {
      work_changed_.notify_one();
    }
    if (wake_timer) timer_wake_.notify_one();
    return;
  }
  // No thread is woken: the instance's thread sleeps on, and the answer comes from this one.
  metrics_.caller_runs->Increment();
  Dispatch(*lent, instances_[*lent].executor, std::move(batch), Attempt::kFirst, /*more_queued=*/false);
  bool wanted = false;  // work came for the instance's thread while this one had it
  {
    std::lock_guard lock(mu_);
    InstanceState& instance = instances_[*lent];
    instance.lent = false;
    --lent_;
    wanted = queue_.size() > 0 || !instance.retries.empty();
  }
  if (wanted) work_changed_.notify_all();
}

std::optional<size_t> Scheduler::LendIdleInstanceLocked(SteadyTime now, Entries* batch) {
  CallerRunFacts facts{
      .allowed = true,
      .queued = queue_.size(),
      .mean_batch = mean_batch_.load(std::memory_order_relaxed),
      .mean_execution =
          std::chrono::nanoseconds(static_cast<int64_t>(mean_execution_ns_.load(std::memory_order_relaxed))),
      .mean_interval = std::chrono::nanoseconds(static_cast<int64_t>(mean_interval_ns_)),
  };
  size_t idle = instances_.size();
  for (size_t i = 0; i < instances_.size(); ++i) {
    const InstanceState& state = instances_[i];
    if (state.waiting && !state.lent && !state.quarantined && state.retries.empty()) {
      idle = i;
      break;
    }
  }
  facts.instance_waiting = idle < instances_.size();
  if (facts.queued == 1 && facts.instance_waiting) {
    queue_.Snapshot(1, &snapshot_);
    facts.decision = DecideBatch(snapshot_, now, batch_policy_);
  }
  if (!CallerRunsBatch(facts)) return std::nullopt;
  InstanceState& state = instances_[idle];
  if (!state.executor->TryAcquireSlot()) return std::nullopt;
  state.lent = true;
  ++lent_;
  queue_.PopFront(1, batch);
  QueueChangedLocked();
  return idle;
}

Status Scheduler::AdmitLocked(std::unique_ptr<QueueEntry>& entry, SteadyTime now,
                              std::unique_ptr<QueueEntry>* superseded, bool* wake_timer) {
  const InferenceRequest& request = *entry->request;
  if (stopping_) return Unavailable("the server is shutting down");
  if (instance_count_ == 0) return Unavailable("model '" + config_.name + "' has no instances");
  if (serving_ == 0 && replacing_ == 0) return NoInstanceLeft();
  if (request.cancel->cancelled()) return Cancelled("the client went away before the request was queued");
  entry->level = queue_.LevelOf(request);
  entry->deadline = queue_.DeadlineOf(request, entry->level, now);
  if (entry->deadline && *entry->deadline <= now) {
    if (queue_.policy(entry->level).timeout_action == QueuePolicyConfig::TimeoutAction::kReject) {
      return DeadlineExceeded("the request's deadline passed before it was queued, " +
                              std::to_string(MicrosOf(now - request.arrival)) +
                              " us after it arrived; it was not executed");
    }
    entry->delayed = true;
  }
  std::optional<uint64_t> older;
  if (!entry->source.empty()) older = queue_.FindSource(entry->source);
  Status room = queue_.HasRoom(entry->level, older);
  if (!room.ok()) return room.WithContext("model '" + config_.name + "'");
  if (options_.byte_budget) {
    size_t bytes = 0;
    for (const Tensor& t : entry->inputs) bytes += t.byte_size();
    std::optional<ByteReservation> reservation = options_.byte_budget->TryReserve(bytes);
    if (!reservation) {
      return ResourceExhausted("the server's budget for queued tensor bytes is exhausted (" +
                               std::to_string(options_.byte_budget->used()) + " of " +
                               std::to_string(options_.byte_budget->capacity()) + " bytes in use; this request needs " +
                               std::to_string(bytes) + ")");
    }
    entry->bytes = std::move(*reservation);
  }
  if (older) *superseded = queue_.Remove(*older);
  const std::optional<SteadyTime> earliest = queue_.NextDeadline();
  if (entry->deadline && !entry->delayed && (!earliest || *entry->deadline < *earliest)) {
    timer_dirty_ = true;
    *wake_timer = true;
  }
  if (preserve_ordering_) entry->order = next_order_++;
  if (options_.callers_run_lone_requests && last_admitted_) {
    constexpr double kWeight = 0.1;
    // An idle minute counts as 1 ms: a burst after it is seen as one within a few dozen requests.
    constexpr double kLongestNanos = 1e6;
    const double nanos = static_cast<double>(std::chrono::nanoseconds(now - *last_admitted_).count());
    mean_interval_ns_ = UpdateMean(mean_interval_ns_, std::clamp(nanos, 1.0, kLongestNanos), kWeight);
  }
  last_admitted_ = now;
  queue_.Push(std::move(entry));
  QueueChangedLocked();
  return Status::Ok();
}

void Scheduler::QueueChangedLocked() {
  ++generation_;
  queued_.store(queue_.size(), std::memory_order_relaxed);
  // Added, not set: during a swap two copies of one version share the series, and each adds its own queue.
  for (uint32_t level = 1; level <= queue_.levels(); ++level) {
    const size_t depth = queue_.size(level);
    size_t& reported = reported_depth_[level - 1];
    if (depth != reported)
      metrics_.queue_depth[level - 1]->Add(static_cast<double>(depth) - static_cast<double>(reported));
    reported = depth;
  }
  if (queue_.size() != reported_pending_) {
    metrics_.triton.pending->Add(static_cast<double>(queue_.size()) - static_cast<double>(reported_pending_));
    reported_pending_ = queue_.size();
  }
}

// A batch between its submission and its answers.
struct Scheduler::InFlight {
  size_t instance = 0;
  Attempt attempt = Attempt::kFirst;
  Entries entries;
  std::vector<int64_t> batch_sizes;
  int64_t items = 0;
  std::chrono::nanoseconds compute_input{0};  // gathering the inputs into one batch
  // When a request of the batch is traced: the batch's own span (one per batch, in a trace of its own, linked both
  // ways with the requests' compute spans), and when the batch was formed.
  std::optional<std::pair<TraceId, SpanId>> trace;
  SteadyTime formed;
  // A first attempt of several requests keeps its joined inputs (another reference, no copy) until it completes:
  // should it run out of memory, each request gets its inputs back from them as views for the retry.
  std::vector<Tensor> inputs;
  // With Options::execution_timeout: its place in watched_ (valid while there), and whether the watchdog answered
  // its requests (guarded by mu_; then the completion only cleans up).
  bool watched = false;
  std::multimap<SteadyTime, std::shared_ptr<InFlight>>::iterator watch;
  bool overran = false;
};

void Scheduler::Serve(std::stop_token stop, size_t instance, InstanceExecutor* executor) {
  const size_t snapshot_size =
      batch_policy_.dynamic_batching ? static_cast<size_t>(batch_policy_.max_batch_size) + 1 : 1;
  BatchPolicyOptions policy = batch_policy_;  // this instance's: its batch cap comes and goes
  Entries batch;
  Entries expired;
  bool have_slot = false;  // a slot of the executor, taken for the batch about to be popped
  std::unique_lock lock(mu_);
  InstanceState& state = instances_[instance];
  std::deque<Entries>& retries = instances_[instance].retries;
  // A quarantined instance takes no more work: its thread ends here, once its execution has returned (inline) or
  // as soon as it sees it (a lane's slot would only queue a batch behind the one that hangs).
  while (!stop.stop_requested() && !state.quarantined) {
    if (state.lent) {
      // A submitting thread runs a batch on the instance (Submit). Lent, it holds no slot; it may be lent again.
      state.waiting = true;
      work_changed_.wait(lock, stop, [&state] { return !state.lent || state.quarantined; });
      state.waiting = false;
      continue;
    }
    // Checked here as well as by the timer, which may run late: an expired request must never start.
    const SteadyTime now = std::chrono::steady_clock::now();
    if (queue_.Expire(now, &expired)) {
      QueueChangedLocked();
      if (!expired.empty()) {
        lock.unlock();
        AnswerExpired(expired, now);
        lock.lock();
        continue;
      }
    }
    const int64_t oom_cap = BatchCapLocked(instance, now);
    policy.batch_cap = oom_cap;
    if (tuner_) {
      const int64_t tuned = tuner_->Cap(now);
      policy.batch_cap = oom_cap > 0 ? std::min(oom_cap, tuned) : tuned;
    }
    BatchDecision decision;
    if (!retries.empty()) {
      // A retry goes first: its requests left the queue before any that is still queued.
      decision = BatchDecision::Run(retries.front().size());
    } else {
      queue_.Snapshot(snapshot_size, &snapshot_);
      decision = DecideBatch(snapshot_, now, policy);
    }
    if (decision.kind != BatchDecision::Kind::kRun && have_slot) {
      // Never hold a slot while idle: for a best-effort instance it is a share of the device's budget.
      executor->ReleaseSlot();
      have_slot = false;
    }
    const uint64_t seen = generation_;
    auto changed = [this, seen] { return generation_ != seen; };
    // A capped instance also wakes when its cap ends, to report it lifted.
    const SteadyTime cap_end = oom_cap > 0 ? instances_[instance].cap_until : SteadyTime::max();
    switch (decision.kind) {
      case BatchDecision::Kind::kIdle:
        state.waiting = true;  // a retry would have been the decision
        if (oom_cap > 0) {
          work_changed_.wait_until(lock, stop, cap_end, changed);
        } else {
          work_changed_.wait(lock, stop, changed);
        }
        state.waiting = false;
        break;
      case BatchDecision::Kind::kWait:
        work_changed_.wait_until(lock, stop, std::min(decision.wait_until, cap_end), changed);
        break;
      case BatchDecision::Kind::kRun: {
        if (!have_slot && !executor->TryAcquireSlot()) {
          // Gated on completions: the requests stay queued (and may form a larger batch) until a slot frees.
          lock.unlock();
          const bool acquired = executor->AcquireSlot(stop);
          lock.lock();
          if (!acquired) break;
          have_slot = true;
          continue;  // decide again: the queue moved on while this thread waited
        }
        have_slot = false;  // Dispatch uses it
        Attempt attempt = Attempt::kFirst;
        if (!retries.empty()) {
          batch = std::move(retries.front());
          retries.pop_front();
          attempt = Attempt::kRetry;
        } else {
          queue_.PopFront(decision.count, &batch);
          QueueChangedLocked();
        }
        const bool more = queue_.size() > 0;
        const bool more_for_this_instance = more || !retries.empty();
        lock.unlock();
        if (more) work_changed_.notify_one();
        Dispatch(instance, executor, std::move(batch), attempt, more_for_this_instance);
        batch.clear();
        lock.lock();
        break;
      }
    }
  }
  if (have_slot) executor->ReleaseSlot();
}

void Scheduler::RunTimer(std::stop_token stop) {
  Entries expired;
  Entries cancelled;
  std::vector<Overrun> overruns;
  Entries orphans;
  std::unique_lock lock(mu_);
  while (!stop.stop_requested()) {
    auto woken = [this] { return timer_dirty_ || !cancelled_.empty(); };
    std::optional<SteadyTime> next = queue_.NextDeadline();
    if (!watched_.empty() && (!next || watched_.begin()->first < *next)) next = watched_.begin()->first;
    if (next) {
      timer_wake_.wait_until(lock, stop, *next, woken);
    } else {
      timer_wake_.wait(lock, stop, woken);
    }
    timer_dirty_ = false;
    if (stop.stop_requested()) break;
    const SteadyTime now = std::chrono::steady_clock::now();
    const bool changed = queue_.Expire(now, &expired);
    if (changed) QueueChangedLocked();
    cancelled.swap(cancelled_);
    TimeOutExecutionsLocked(now, &overruns, &orphans);
    if (!changed && cancelled.empty() && overruns.empty() && orphans.empty()) continue;
    lock.unlock();
    // A DELAY level's reordering or a removed head can change what an instance should run; a quarantined
    // instance's thread must see it is.
    if (changed || !overruns.empty()) work_changed_.notify_all();
    AnswerExpired(expired, now);
    for (auto& e : cancelled) Answer(*e, Cancelled("the client went away while the request was queued"));
    cancelled.clear();  // destroys the cancel registrations outside the lock
    for (Overrun& overrun : overruns) {
      if (!overrun.log.empty()) {
        WEFT_LOG(Warning) << overrun.log;
      }
      for (auto& e : overrun.entries) {
        if (e->request->cancel->cancelled()) {
          Answer(*e, Cancelled("the client went away while the request ran; its execution overran its limit"));
        } else {
          Answer(*e, overrun.status);
        }
      }
    }
    overruns.clear();
    AnswerOrphans(orphans);
    lock.lock();
  }
}

void Scheduler::TimeOutExecutionsLocked(SteadyTime now, std::vector<Overrun>* overruns, Entries* orphans) {
  if (watched_.empty() || watched_.begin()->first > now) return;
  const std::string where = "model '" + config_.name + "' version " + std::to_string(options_.version) + ": ";
  const std::string limit = "weft.execution_timeout_ms (" + std::to_string(options_.execution_timeout.count()) + " ms)";
  while (!watched_.empty() && watched_.begin()->first <= now) {
    const size_t instance = watched_.begin()->second->instance;
    InstanceState& state = instances_[instance];
    const bool quarantine = !state.quarantined;
    const bool replace = quarantine && options_.replace_instance && !stopping_;
    const std::string fate = replace ? "its instance was taken out of service and is being replaced"
                                     : "its instance was taken out of service";
    // The one that overran first, then the batches queued behind it on the same instance (a lane's): they would
    // wait for it, however long it hangs.
    bool first = true;
    for (auto it = watched_.begin(); it != watched_.end();) {
      if (it->second->instance != instance) {
        ++it;
        continue;
      }
      InFlight& batch = *it->second;
      batch.overran = true;
      Overrun overrun{.entries = std::move(batch.entries)};
      if (first) {
        overrun.status = Internal(where + "the execution did not finish within " + limit + "; " + fate);
        if (quarantine) {
          overrun.log = where + "an execution of " + std::to_string(overrun.entries.size()) +
                        " request(s) on instance " + std::to_string(state.number) + " did not finish within " + limit +
                        "; its requests were answered with an error and " + fate;
        }
      } else {
        overrun.status =
            Internal(where + "the execution waited on its instance behind one that did not finish within " + limit +
                     "; " + fate);
      }
      first = false;
      metrics_.execution_timeouts->Increment();
      overruns->push_back(std::move(overrun));
      it = watched_.erase(it);
    }
    if (!quarantine) continue;
    state.quarantined = true;
    --serving_;
    // Halves waiting for a retry on this instance would never run.
    for (Entries& half : state.retries) {
      overruns->push_back({.entries = std::move(half),
                           .status = Unavailable(where + "the instance was taken out of service (" + limit +
                                                 ") before this request's retry after running out of memory")});
    }
    state.retries.clear();
    state.batch_cap = 0;
    ReportBatchCapLocked(now);
    ++generation_;  // wakes its thread, to stop
    if (replace) {
      try {
        threads_.emplace_back([this, number = state.number] {
          SetCurrentThreadName("r:" + config_.name);
          Replace(number);
        });
        ++replacing_;
      } catch (const std::system_error& e) {
        WEFT_LOG(Error) << where << "cannot start a thread to replace instance " << state.number << ": " << e.what()
                        << "; serving with one instance fewer";
      }
    } else if (quarantine && !stopping_) {
      WEFT_LOG(Error) << where << "instance " << state.number
                      << " was taken out of service and nothing can replace it; serving with one instance fewer";
    }
  }
  TakeOrphansLocked(orphans);
}

void Scheduler::Replace(size_t number) {
  const std::string where = "model '" + config_.name + "' version " + std::to_string(options_.version) + ": ";
  const SteadyTime start = std::chrono::steady_clock::now();
  Result<InstanceReplacement> made = options_.replace_instance(number);
  if (made.ok() && !made->instance) made = Internal("replace_instance returned no instance");
  const SteadyTime::duration took = std::chrono::steady_clock::now() - start;
  std::optional<InstanceReplacement> unused;  // destroyed outside mu_: a lane's destructor may wait
  Status failed;
  Entries orphans;
  {
    std::lock_guard lock(mu_);
    --replacing_;
    if (!made.ok()) {
      failed = made.status();
    } else if (stopping_) {
      unused = std::move(made).value();
    } else {
      InstanceReplacement& replacement = replacements_.emplace_back(std::move(made).value());
      if (!replacement.executor) replacement.executor = std::make_unique<InlineExecutor>(replacement.instance.get());
      const size_t index = instances_.size();
      InstanceState& added = instances_.emplace_back();
      added.number = number;
      added.executor = replacement.executor.get();
      try {
        threads_.emplace_back([this, index, executor = replacement.executor.get()](std::stop_token stop) {
          SetCurrentThreadName("i:" + config_.name);
          Serve(stop, index, executor);
        });
        ++serving_;
        ++generation_;
      } catch (const std::system_error& e) {
        instances_.back().quarantined = true;
        unused = std::move(replacement);
        replacements_.pop_back();
        failed = Unavailable(std::string("cannot start its thread: ") + e.what());
      }
    }
    if (!failed.ok()) TakeOrphansLocked(&orphans);
  }
  if (made.ok() && !unused) {
    metrics_.instances_replaced->Increment();
    WEFT_LOG(Warning) << where << "instance " << number << " replaced by a fresh one, created in "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  } else if (!failed.ok()) {
    WEFT_LOG(Error) << where << "cannot replace instance " << number << ": " << failed.ToString()
                    << "; serving with one instance fewer";
  }
  AnswerOrphans(orphans);
}

Status Scheduler::NoInstanceLeft() const {
  return Unavailable("model '" + config_.name + "' version " + std::to_string(options_.version) +
                     ": no instance is left; every one was taken out of service after an execution overran "
                     "weft.execution_timeout_ms and none could be replaced");
}

void Scheduler::TakeOrphansLocked(Entries* orphans) {
  if (serving_ > 0 || replacing_ > 0 || queue_.size() == 0) return;
  Entries taken = queue_.TakeAll();
  QueueChangedLocked();
  std::move(taken.begin(), taken.end(), std::back_inserter(*orphans));
}

void Scheduler::AnswerOrphans(Entries& orphans) {
  for (auto& e : orphans) Answer(*e, NoInstanceLeft());
  orphans.clear();
}

void Scheduler::OnCancelled(uint64_t id) {
  {
    std::lock_guard lock(mu_);
    std::unique_ptr<QueueEntry> entry = queue_.Remove(id);
    if (!entry) return;  // it started, or left already
    QueueChangedLocked();
    // Destroying the entry here would destroy this very callback's registration.
    cancelled_.push_back(std::move(entry));
  }
  timer_wake_.notify_one();
  work_changed_.notify_all();
}

void Scheduler::AnswerExpired(Entries& expired, SteadyTime now) {
  for (auto& e : expired) {
    Answer(*e, DeadlineExceeded("the request's deadline passed after " + std::to_string(MicrosOf(now - e->enqueued)) +
                                " us in the queue; it was not executed"));
  }
  expired.clear();
}

void Scheduler::Dispatch(size_t instance, InstanceExecutor* executor, Entries batch, Attempt attempt,
                         bool more_queued) {
  const SteadyTime start = std::chrono::steady_clock::now();
  for (auto& e : batch) {
    // Out of the queue now: the bytes no longer count, and a cancel no longer needs a callback (a result is
    // dropped instead). Both are released here, outside mu_.
    e->bytes.Reset();
    e->cancel_registration.reset();
    // Once per request: the wait of a retry is not time in the queue.
    if (attempt == Attempt::kFirst) {
      e->queued = start - e->enqueued;
      metrics_.queue_duration->Observe(Seconds(e->queued));
    }
    if (e->request->cancel->cancelled()) {
      Answer(*e, Cancelled("the client went away before the request ran"));
      e.reset();
    } else if (e->deadline && !e->delayed && *e->deadline <= start &&
               queue_options_.levels[e->level - 1].timeout_action == QueuePolicyConfig::TimeoutAction::kReject) {
      // Its deadline passed between the dispatch decision (or the execution that ran out of memory) and now.
      Answer(*e, DeadlineExceeded(attempt == Attempt::kFirst
                                      ? "the request's deadline passed after " +
                                            std::to_string(MicrosOf(start - e->enqueued)) +
                                            " us in the queue; it was not executed"
                                      : "the request's deadline passed before its retry after running out of memory"));
      e.reset();
    }
  }
  std::erase(batch, nullptr);
  if (batch.empty()) {
    executor->ReleaseSlot();
    return;
  }
  auto inflight = std::make_shared<InFlight>();
  inflight->instance = instance;
  inflight->attempt = attempt;
  std::vector<const std::vector<Tensor>*> parts;
  parts.reserve(batch.size());
  inflight->batch_sizes.reserve(batch.size());
  bool background = true;  // no client waits for any of its requests
  for (auto& e : batch) {
    parts.push_back(&e->inputs);
    inflight->batch_sizes.push_back(e->batch_size);
    inflight->items += e->batch_size;
    background = background && e->request->background;
  }
  const SteadyTime join_start = std::chrono::steady_clock::now();
  std::vector<Tensor> joined = JoinInputs(parts);
  const SteadyTime join_end = std::chrono::steady_clock::now();
  inflight->compute_input = join_end - join_start;
  inflight->formed = join_start;
  for (auto& e : batch) {
    RequestTrace* trace = e->request->trace.get();
    if (trace == nullptr) continue;
    if (!inflight->trace) inflight->trace.emplace(NewTraceId(), NewSpanId());
    trace->Stamp(TraceStage::kComputeStart, join_start);
    trace->Stamp(TraceStage::kComputeInputEnd, join_end);
    trace->JoinBatch(inflight->trace->first, inflight->trace->second, inflight->items);
  }
  // The executor holds what the backend reads (the joined copy, or the one request's own tensors) until the
  // execution completes; the requests' references go now, so a joined batch frees the request bytes at once.
  for (auto& e : batch) e->inputs.clear();
  if (attempt == Attempt::kFirst && batch.size() >= 2) inflight->inputs = joined;
  // Requests come one at a time (kLoneMeanBatch). Under load the slot that the answering batch holds lets the next
  // batch grow, which is worth more than the completion loop's wake-up. Decided before the batch is published to
  // the watchdog, which may take its entries from then on.
  const bool lone = !more_queued && batch.size() == 1 && mean_batch_.load(std::memory_order_relaxed) < kLoneMeanBatch;
  inflight->entries = std::move(batch);
  bool quarantined = false;
  bool wake_timer = false;
  {
    std::lock_guard lock(mu_);
    quarantined = instances_[instance].quarantined;
    if (!quarantined) {
      ++inflight_;
      running_.store(inflight_, std::memory_order_relaxed);
      if (options_.execution_timeout.count() > 0) {
        // Counted from the submission: a lane's batch may wait there for the one before it.
        const SteadyTime deadline = std::chrono::steady_clock::now() + options_.execution_timeout;
        wake_timer = watched_.empty() || deadline < watched_.begin()->first;
        if (wake_timer) timer_dirty_ = true;
        inflight->watch = watched_.emplace(deadline, inflight);
        inflight->watched = true;
      }
    }
  }
  if (quarantined) {
    // Taken out of service while this batch was being formed: it would wait behind the execution that hangs.
    executor->ReleaseSlot();
    for (auto& e : inflight->entries) {
      Answer(*e, Unavailable("model '" + config_.name + "' version " + std::to_string(options_.version) +
                             ": its instance was taken out of service after an execution overran "
                             "weft.execution_timeout_ms before this request ran"));
    }
    return;
  }
  if (wake_timer) timer_wake_.notify_one();
  executor->Submit(
      std::move(joined),
      [this, inflight](Result<std::vector<Tensor>> outputs, const ExecutionTiming& timing) {
        bool overran = false;
        if (inflight->watched) {
          std::lock_guard lock(mu_);
          overran = inflight->overran;
          if (!overran) watched_.erase(inflight->watch);
        }
        if (overran) {
          // The watchdog answered its requests at the limit; the execution that hung is reaped here.
          inflight->inputs.clear();
          WEFT_LOG(Info) << "model '" << config_.name << "' version " << options_.version
                         << ": an execution that overran its limit returned after "
                         << MicrosOf(timing.end - timing.start) / 1000 << " ms; its outputs are dropped";
        } else {
          Finish(*inflight, std::move(outputs), timing);
        }
        inflight->entries.clear();
        // The last touch of `this`: the destructor may run as soon as mu_ is released.
        std::lock_guard lock(mu_);
        running_.store(--inflight_, std::memory_order_relaxed);
        if (inflight_ == 0) inflight_done_.notify_all();
      },
      BatchHints{.background = background, .lone = lone});
}

void Scheduler::Finish(InFlight& inflight, Result<std::vector<Tensor>> outputs, const ExecutionTiming& timing) {
  const SteadyTime finish_start = std::chrono::steady_clock::now();
  Entries& batch = inflight.entries;
  metrics_.compute_duration->Observe(Seconds(timing.end - timing.start));
  RecordExecution(batch.size(), timing.end - timing.start);
  if (outputs.ok()) TuneBatchCap(inflight.items, inflight.compute_input + (timing.end - timing.start));
  metrics_.execution_count->Increment();
  metrics_.inference_count->Increment(static_cast<double>(inflight.items));
  metrics_.triton.execution_count->Increment();
  metrics_.triton.inference_count->Increment(static_cast<double>(inflight.items));
  metrics_.batch_size->Observe(static_cast<double>(inflight.items));
  if (!outputs.ok() && outputs.status().code() == StatusCode::kOutOfMemory && RetryAfterOutOfMemory(inflight)) {
    return;
  }
  inflight.inputs.clear();  // not needed for a retry: the request bytes can go before the answers

  Result<std::vector<std::vector<Tensor>>> split = [&]() -> Result<std::vector<std::vector<Tensor>>> {
    if (!outputs.ok()) return outputs.status();
    if (batch.size() == 1) return std::vector<std::vector<Tensor>>{std::move(outputs).value()};
    return SplitOutputs(*outputs, inflight.batch_sizes);
  }();
  if (outputs.ok() && !split.ok()) {
    WEFT_LOG(Error) << "model '" << config_.name << "': " << split.status().message();
  }
  // Every answer is made before any is sent, and the batch's statistics are recorded between the two: a client that
  // has its answer and asks for the statistics finds its execution counted everywhere (perf_analyzer checks that
  // the counts agree).
  std::vector<Result<InferenceResponse>> results;
  results.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    QueueEntry& e = *batch[i];
    if (e.request->cancel->cancelled()) {
      results.emplace_back(Cancelled("the client went away while the request ran; its result was dropped"));
      continue;
    }
    if (!split.ok()) {
      results.emplace_back(split.status());
      continue;
    }
    std::vector<Tensor> mine = std::move((*split)[i]);
    if (options_.finish_outputs) {
      Result<std::vector<Tensor>> finished = options_.finish_outputs(*e.request, std::move(mine), e.batch_size);
      if (!finished.ok()) {
        WEFT_LOG(Error) << "model '" << config_.name << "': " << finished.status().message();
        results.emplace_back(finished.status());
        continue;
      }
      mine = std::move(finished).value();
    }
    InferenceResponse response;
    response.model_name = config_.name;
    response.model_version = options_.version;
    response.id = e.request->id;
    response.outputs = std::move(mine);
    results.emplace_back(std::move(response));
  }
  const auto output_time = std::chrono::steady_clock::now() - finish_start;
  if (outputs.ok() && split.ok()) {
    auto add = [](StatisticDuration& d, SteadyTime::duration took) {
      ++d.count;
      d.ns += static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::nanoseconds(took).count()));
    };
    std::lock_guard lock(batch_stats_mu_);
    BatchStatistics& stats = batch_stats_[static_cast<uint64_t>(inflight.items)];
    stats.batch_size = static_cast<uint64_t>(inflight.items);
    add(stats.compute_input, inflight.compute_input);
    add(stats.compute_infer, timing.end - timing.start);
    add(stats.compute_output, output_time);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    QueueEntry& e = *batch[i];
    if (results[i].ok()) {
      if (RequestTrace* trace = e.request->trace.get()) {
        trace->Stamp(TraceStage::kInferStart, timing.start);
        trace->Stamp(TraceStage::kComputeOutputStart, timing.end);
        trace->Stamp(TraceStage::kComputeEnd);
      }
      RecordSuccessTimes(metrics_, {.queue = e.queued,
                                    .compute_input = inflight.compute_input,
                                    .compute_infer = timing.end - timing.start,
                                    .compute_output = output_time});
    }
    Answer(e, std::move(results[i]));
  }
  if (inflight.trace) ExportBatchSpan(inflight, outputs.status(), timing);
}

void Scheduler::ExportBatchSpan(const InFlight& inflight, const Status& outcome, const ExecutionTiming& timing) {
  const RequestTrace* first = nullptr;
  SpanData span;
  span.trace_id = inflight.trace->first;
  span.span_id = inflight.trace->second;
  span.name = "batch " + config_.name;
  for (const auto& e : inflight.entries) {
    const RequestTrace* trace = e->request->trace.get();
    if (trace == nullptr) continue;
    if (first == nullptr) first = trace;
    span.links.push_back({trace->trace_id(), trace->server_span_id(), {}});
  }
  if (first == nullptr) return;
  span.start_unix_ns = first->WallNs(inflight.formed);
  span.end_unix_ns = first->WallNs(std::chrono::steady_clock::now());
  span.attributes = {{"weft.model", config_.name},
                     {"weft.model_version", options_.version},
                     {"weft.batch_size", inflight.items},
                     {"weft.batch_requests", static_cast<int64_t>(inflight.entries.size())},
                     {"weft.instance", static_cast<int64_t>(instances_[inflight.instance].number)},
                     {"weft.compute_infer_ns", static_cast<int64_t>((timing.end - timing.start).count())}};
  if (timing.stream != nullptr) span.attributes.emplace_back("weft.stream", *timing.stream);
  if (timing.device != nullptr) span.attributes.emplace_back("weft.device", *timing.device);
  if (inflight.attempt == Attempt::kRetry) span.attributes.emplace_back("weft.retry_after_oom", true);
  if (!outcome.ok()) {
    span.status = SpanData::StatusCode::kError;
    span.status_message = outcome.message();
  }
  first->Export(std::move(span));
}

std::vector<BatchStatistics> Scheduler::ExecutionsByBatchSize() const {
  std::lock_guard lock(batch_stats_mu_);
  std::vector<BatchStatistics> out;
  out.reserve(batch_stats_.size());
  for (const auto& [size, stats] : batch_stats_) out.push_back(stats);
  return out;
}

bool Scheduler::RetryAfterOutOfMemory(InFlight& inflight) {
  const SteadyTime now = std::chrono::steady_clock::now();
  Entries& batch = inflight.entries;
  // Retried once: a half that runs out of memory again, or a request alone, answers with the error.
  bool split = inflight.attempt == Attempt::kFirst && batch.size() >= 2;
  if (split) {
    Result<std::vector<std::vector<Tensor>>> inputs = SplitOutputs(inflight.inputs, inflight.batch_sizes);
    if (inputs.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) batch[i]->inputs = std::move((*inputs)[i]);
    } else {
      WEFT_LOG(Error) << "model '" << config_.name
                      << "': cannot cut a batch's inputs for its retry: " << inputs.status().message();
      split = false;
    }
  }
  inflight.inputs.clear();  // the requests' views hold the bytes they need
  // Before the retry (or the next batch): what the device's pools hold free may be what the batch lacked.
  if (options_.on_out_of_memory) options_.on_out_of_memory();
  // At a request boundary, the first half the larger: a request's items never run in two executions.
  const size_t first = (batch.size() + 1) / 2;
  const size_t second = batch.size() - first;
  const int64_t cap = std::max<int64_t>(1, inflight.items / 2);
  int64_t capped_at = 0;
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    InstanceState& state = instances_[inflight.instance];
    if (inflight.items >= 2) {
      // Lowered further by a smaller batch that still runs out of memory; the time starts again.
      state.batch_cap = state.batch_cap > 0 && now < state.cap_until ? std::min(state.batch_cap, cap) : cap;
      state.cap_until = now + options_.oom_batch_cap_for;
      capped_at = state.batch_cap;
      ReportBatchCapLocked(now);
    }
    // Once stopping, nothing would run a retry: the requests are answered with the error instead.
    if (split && !stopping_ && !state.quarantined) {
      const auto middle = batch.begin() + static_cast<std::ptrdiff_t>(first);
      state.retries.emplace_back(std::make_move_iterator(batch.begin()), std::make_move_iterator(middle));
      state.retries.emplace_back(std::make_move_iterator(middle), std::make_move_iterator(batch.end()));
      batch.clear();
      ++generation_;
      queued = true;
    }
  }
  if (queued) {
    metrics_.oom_retries->Increment();
    // The instance's thread runs them; the others wake to no change and wait again.
    work_changed_.notify_all();
  }
  if (capped_at > 0) {
    WEFT_LOG(Warning) << "model '" << config_.name << "' version " << options_.version
                      << ": out of memory at a batch of " << inflight.items << " items (" << first + second
                      << " requests); "
                      << (queued ? "retrying as two halves of " + std::to_string(first) + " and " +
                                       std::to_string(second) + " requests"
                                 : std::string("not retried"))
                      << "; this instance's batches are capped at " << capped_at << " items for "
                      << Seconds(options_.oom_batch_cap_for) << " s";
  }
  return queued;
}

int64_t Scheduler::BatchCapLocked(size_t instance, SteadyTime now) {
  InstanceState& state = instances_[instance];
  if (state.batch_cap > 0 && now >= state.cap_until) {
    state.batch_cap = 0;
    ReportBatchCapLocked(now);
  }
  return state.batch_cap;
}

void Scheduler::TuneBatchCap(int64_t items, SteadyTime::duration took) {
  if (!tuner_) return;  // set or not for the scheduler's life: no lock, no clock for a model that is not tuned
  const SteadyTime now = std::chrono::steady_clock::now();
  int64_t chosen = 0;
  int64_t was = 0;
  {
    std::lock_guard lock(mu_);
    was = tuner_->chosen();
    if (!tuner_->Observe(items, std::chrono::duration_cast<std::chrono::nanoseconds>(took), now)) return;
    chosen = tuner_->chosen();
    // A probe ended, so the cap moved: an instance waiting for a batch to fill decides again.
    ++generation_;
  }
  work_changed_.notify_all();
  if (chosen == was) return;
  metrics_.tuned_batch_cap->Set(static_cast<double>(chosen));
  WEFT_LOG(Info) << "model '" << config_.name << "' version " << options_.version << ": batches now hold at most "
                 << chosen << " items, the size that costs least per item as measured (" << was << " before)";
}

void Scheduler::ReportBatchCapLocked(SteadyTime now) {
  int64_t lowest = 0;
  for (const InstanceState& state : instances_) {
    if (!state.quarantined && state.batch_cap > 0 && now < state.cap_until &&
        (lowest == 0 || state.batch_cap < lowest)) {
      lowest = state.batch_cap;
    }
  }
  if (lowest == reported_cap_) return;
  reported_cap_ = lowest;
  metrics_.oom_batch_cap->Set(static_cast<double>(lowest));
}

void Scheduler::Answer(QueueEntry& entry, Result<InferenceResponse> result) {
  if (entry.order == 0) {
    Complete(metrics_, *entry.request, entry.on_done, std::move(result));
    return;
  }
  {
    std::lock_guard lock(order_mu_);
    held_.emplace(entry.order, HeldAnswer{std::move(entry.request), std::move(entry.on_done), std::move(result)});
  }
  ReleaseHeldAnswers();
}

void Scheduler::ReleaseHeldAnswers() {
  {
    std::lock_guard lock(order_mu_);
    // The thread already releasing answers this one too, in order; a second would race it to the callbacks.
    if (releasing_) return;
    releasing_ = true;
  }
  for (;;) {
    std::vector<HeldAnswer> next;
    {
      std::lock_guard lock(order_mu_);
      for (auto it = held_.begin(); it != held_.end() && it->first == next_release_; it = held_.erase(it)) {
        next.push_back(std::move(it->second));
        ++next_release_;
      }
      if (next.empty()) {
        releasing_ = false;
        return;
      }
    }
    for (HeldAnswer& h : next) Complete(metrics_, *h.request, h.on_done, std::move(h.result));
  }
}

// Several completion threads may update the means at once; a lost update only weights one sample less.
void Scheduler::RecordExecution(size_t requests, SteadyTime::duration took) {
  constexpr double kWeight = 0.1;
  mean_batch_.store(UpdateMean(mean_batch_.load(std::memory_order_relaxed), static_cast<double>(requests), kWeight),
                    std::memory_order_relaxed);
  const double nanos = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(took).count());
  mean_execution_ns_.store(
      UpdateMean(mean_execution_ns_.load(std::memory_order_relaxed), std::max(1.0, nanos), kWeight),
      std::memory_order_relaxed);
}

std::chrono::nanoseconds Scheduler::ExpectedLatency() const {
  return weft::ExpectedLatency({
      .queued = queued_.load(std::memory_order_relaxed),
      .instances = instance_count_,
      .running = running_.load(std::memory_order_relaxed),
      .mean_batch = mean_batch_.load(std::memory_order_relaxed),
      .mean_execution =
          std::chrono::nanoseconds(static_cast<int64_t>(mean_execution_ns_.load(std::memory_order_relaxed))),
  });
}

}  // namespace weft
