#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "model/backend.h"
#include "model/model_config.h"
#include "model/request.h"
#include "scheduler/batch_policy.h"
#include "scheduler/batch_tuner.h"
#include "scheduler/byte_budget.h"
#include "scheduler/instance_executor.h"
#include "scheduler/request_queue.h"
#include "scheduler/version_metrics.h"
#include "scheduler/wait_estimate.h"

namespace weft {

// Turns one request's share of an execution's outputs (framework shapes, the backend's order, `batch_size`
// items) into the outputs of its response. An error answers the request with it.
using OutputFinisher = std::function<Result<std::vector<Tensor>>(const InferenceRequest& request,
                                                                 std::vector<Tensor> outputs, int64_t batch_size)>;

// A fresh instance made to take the place of one that was quarantined, and where its batches run. The executor
// runs `instance`'s batches; null = on the instance's own thread (InlineExecutor). The executor is destroyed before
// the instance.
struct InstanceReplacement {
  std::unique_ptr<ModelInstance> instance;
  std::unique_ptr<InstanceExecutor> executor;
};

// Runs the requests of one model version on its instances. In order:
//   admission  - the request's priority level and deadline (the level's queue policy), a bounded queue per
//                level, the shared byte budget, latest frame wins (a newer frame from a source replaces the
//                queued one); what does not fit is answered at once;
//   queueing   - a queue per level ordered by deadline; a timer thread answers a request whose deadline passes
//                at that moment, and a cancelled request leaves its queue as its token fires;
//   batching   - a free instance asks DecideBatch (a pure function of the queue's head and the time) what to
//                run, takes a slot of its executor, and hands the joined inputs over; outputs are split back
//                into views per request when the execution completes;
//   out of memory - a batch of two or more requests whose execution fails with OUT_OF_MEMORY is split at a
//                request boundary into two halves, each retried once as its own execution on the same instance
//                (a half that fails again answers its requests with that error), and the instance's batches are
//                capped at half the failed batch's items for Options::oom_batch_cap_for;
//   hung executions - with Options::execution_timeout, the timer thread answers an execution that overruns it
//                INTERNAL at the limit (with it every other batch in flight on that instance), quarantines the
//                instance (its thread takes no more work and exits once the execution returns, which then answers
//                nothing) and, on a thread of its own, asks Options::replace_instance for a fresh instance, whose
//                thread then serves in its place. When that fails the others serve on; once no instance is left and
//                none is being created, queued and new requests are answered UNAVAILABLE.
// One thread per instance forms its batches. By default it also runs them (one at a time, so N instances run N at
// once); with executors (the engine's device lanes) it submits up to the executor's bound of batches in flight and
// the answers come from where the executor completes a batch (the device's completion thread, or the instance's own
// thread when it ran the batch and its completion itself).
// Every submitted request is answered exactly once: by its execution, or with RESOURCE_EXHAUSTED (no room),
// DEADLINE_EXCEEDED (never executed), CANCELLED, ABORTED (superseded) or UNAVAILABLE (the scheduler stopped
// first). Thread-safe; Submit never blocks on an execution.
class Scheduler {
 public:
  struct Options {
    int64_t version = 0;                // reported in responses and metric labels
    size_t max_queue = 0;               // requests queued over all levels; 0 = unbounded
    ByteBudget* byte_budget = nullptr;  // queued input bytes, shared between schedulers; null = none
    OutputFinisher finish_outputs;      // empty = the split outputs as they are
    // One per instance, in the same order: where its batches run. Empty = on the instance's own thread.
    std::vector<InstanceExecutor*> executors;
    // How long an instance's batches stay capped at half the items of a batch that ran out of memory. Long enough
    // that a burst does not walk straight back into the failing size (each attempt costs an execution and, on a
    // GPU, a release of the allocator's cache), short enough that a transient squeeze (another model's peak, a
    // fragmented pool) does not halve the throughput for long.
    SteadyTime::duration oom_batch_cap_for = std::chrono::seconds(60);
    // Called on the completion thread after an execution runs out of memory, before its retry: the engine has the
    // device give back what its pools hold free. Empty = nothing to release.
    std::function<void()> on_out_of_memory;
    // weft.execution_timeout_ms: how long an execution may run before its requests are answered with an error and
    // its instance is replaced; 0 = no limit.
    std::chrono::milliseconds execution_timeout{0};
    // Set: the batch cap is tuned from measured costs (weft.batch_tuning, BatchTuningEnabled), one tuner for all the
    // version's instances (max_batch_size comes from the config). Unset: batches fill to max_batch_size.
    std::optional<BatchTunerOptions> batch_tuning;
    // Creates the instance that takes the place of quarantined instance number `index` (0-based, as in the
    // config; a replacement's replacement keeps the number). Called on a thread of the scheduler's own, never
    // concurrently with the destructor's return; may block for as long as loading a model takes. Empty = no
    // replacement (the quarantined instance is only taken out of service).
    std::function<Result<InstanceReplacement>(size_t index)> replace_instance;
    // Whether a thread that submits a lone request may run its batch itself (CallerRunsBatch), on an instance whose
    // thread is idle. The engine allows it on the CPU device, without weft.execution_timeout_ms (a hung execution
    // would hold the submitting thread: an I/O thread, with its other connections).
    bool callers_run_lone_requests = false;
  };
  struct Work {
    std::unique_ptr<InferenceRequest> request;
    std::vector<Tensor> inputs;  // validated, in config order, framework shapes (batch dim first if it batches)
    InferenceCallback on_done;
    // The submitting thread may run the request's batch itself (Options::callers_run_lone_requests): it is a
    // client's request on its first attempt, submitted from a frontend's thread, not from a completion.
    bool caller_may_run = false;
  };

  // Starts one thread per instance and the timer thread. `instances`, `options.byte_budget` and
  // `options.executors` must outlive the scheduler (a quarantined instance too: its execution may still be running);
  // nothing else calls the instances while it runs. Replacements belong to the scheduler. Throws
  // std::system_error when a thread cannot be created; Create turns that into an error.
  Scheduler(ModelConfig config, std::vector<ModelInstance*> instances, Options options, MetricsRegistry* metrics);
  // The constructor, with thread creation failures (the process's thread or memory limits) as Unavailable:
  // the one model fails to load and the others serve.
  static Result<std::unique_ptr<Scheduler>> Create(ModelConfig config, std::vector<ModelInstance*> instances,
                                                   Options options, MetricsRegistry* metrics);
  // Answers every queued request UNAVAILABLE, stops the threads, and waits until every execution in flight has
  // answered (or, one that timed out, returned: a hung execution holds the destructor until it returns). Never
  // destroy it on an executor's completion thread.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Always takes ownership. Answers at once, on this thread, what cannot be queued; otherwise the answer comes
  // from an instance thread or the timer thread, or from this thread when it ran the batch itself
  // (Work::caller_may_run).
  void Submit(Work work);

  const ModelConfig& config() const { return config_; }
  VersionMetrics& metrics() { return metrics_; }

  // How long a request submitted now would take to be answered, from what is queued and running and the recent
  // executions' measured durations and sizes (wait_estimate.h); 0 before the first execution. Lock-free.
  std::chrono::nanoseconds ExpectedLatency() const;

  // Triton's batch_stats: the executions whose outputs reached their requests, by batch size (items), ascending.
  // Kept by this scheduler, so a version loaded again starts from none. Thread-safe.
  std::vector<BatchStatistics> ExecutionsByBatchSize() const;

 private:
  using Entries = std::vector<std::unique_ptr<QueueEntry>>;

  // Admits `entry` under mu_: sets its level and deadline, takes its bytes, replaces the older frame of its
  // source (returned in `superseded`) and queues it. An error leaves the entry with the caller.
  Status AdmitLocked(std::unique_ptr<QueueEntry>& entry, SteadyTime now, std::unique_ptr<QueueEntry>* superseded,
                     bool* wake_timer);
  struct InFlight;
  // Whether a batch is a first attempt or a half of one that ran out of memory (never split again).
  enum class Attempt { kFirst, kRetry };
  // What one instance's thread keeps besides the shared queue.
  struct InstanceState {
    std::deque<Entries> retries;  // halves of a batch that ran out of memory, run before the queue, in order
    int64_t batch_cap = 0;        // the most items per batch until cap_until (BatchPolicyOptions::batch_cap)
    SteadyTime cap_until;
    size_t number = 0;         // the instance number in the config (a replacement keeps its predecessor's)
    bool quarantined = false;  // an execution overran: its thread takes no more work
    InstanceExecutor* executor = nullptr;
    // Its thread waits for work and holds nothing (no slot, no retry): a submitting thread may borrow the instance.
    bool waiting = false;
    // A submitting thread runs a batch on it (Submit); its own thread takes no work until that thread is done.
    bool lent = false;
  };
  // The batches whose execution the watchdog answered, with why; answered outside mu_.
  struct Overrun {
    Entries entries;
    Status status;
    std::string log;  // a Warning line, for the execution that quarantined its instance
  };
  void Serve(std::stop_token stop, size_t instance, InstanceExecutor* executor);
  // For the thread that has just queued `entry` (the only request queued): an idle instance, lent to it with a slot
  // taken and the request popped into `batch`, when CallerRunsBatch says the caller runs it; nullopt otherwise.
  std::optional<size_t> LendIdleInstanceLocked(SteadyTime now, Entries* batch);
  void RunTimer(std::stop_token stop);
  // The watchdog, on the timer thread: takes the requests of every execution past its deadline (and of the other
  // batches in flight on its instance) into `overruns`, quarantines the instance and starts its replacement.
  // Requests that are left without any instance go to `orphans`.
  void TimeOutExecutionsLocked(SteadyTime now, std::vector<Overrun>* overruns, Entries* orphans);
  // On a replacement thread: creates the instance in place of quarantined instance `number` and starts its thread.
  void Replace(size_t number);
  // When no instance is serving and none is being created: takes every queued request (to answer UNAVAILABLE).
  void TakeOrphansLocked(Entries* orphans);
  void AnswerOrphans(Entries& orphans);
  Status NoInstanceLeft() const;
  // The cancel callback of a queued request; runs on the cancelling thread. Answers on the timer thread, so
  // that no caller's code runs inside CancelToken::Cancel().
  void OnCancelled(uint64_t id);
  // Checks the batch once more (cancelled, expired), joins its inputs and submits it, using the slot taken.
  // `more_queued`: requests or retries were left waiting for the instance (BatchHints::more_queued).
  void Dispatch(size_t instance, InstanceExecutor* executor, Entries batch, Attempt attempt, bool more_queued);
  // On the executor's completion: metrics, outputs split back, answers.
  void Finish(InFlight& batch, Result<std::vector<Tensor>> outputs, const ExecutionTiming& timing);
  // The span of a batch that holds a traced request, to that request's exporter.
  void ExportBatchSpan(const InFlight& batch, const Status& outcome, const ExecutionTiming& timing);
  // After `batch` ran out of memory: caps its instance's batches and, when it may be split, gives each request its
  // inputs back and queues the two halves for the instance's thread (the executor's slot is still held here, so
  // they cannot be submitted now). Returns whether it took the requests; if not, the caller answers them.
  bool RetryAfterOutOfMemory(InFlight& batch);
  // The batch cap of `instance` at `now` (0 = none), after lifting one whose time is up.
  int64_t BatchCapLocked(size_t instance, SteadyTime now);
  // Tells the batch tuner what a successful execution of `items` items cost; wakes the instances when the cap moved.
  // Takes mu_.
  void TuneBatchCap(int64_t items, SteadyTime::duration took);
  // Sets weft_oom_batch_cap to the lowest cap still in force over the instances.
  void ReportBatchCapLocked(SteadyTime now);
  void AnswerExpired(Entries& expired, SteadyTime now);
  // Answers `entry` (with preserve_ordering, once every request admitted before it has been answered).
  void Answer(QueueEntry& entry, Result<InferenceResponse> result);
  // preserve_ordering: answers, in admission order, whatever is held and next in line; one thread at a time.
  void ReleaseHeldAnswers();
  void QueueChangedLocked();

  // Constant after construction.
  const ModelConfig config_;
  const Options options_;
  const BatchPolicyOptions batch_policy_;
  const size_t instance_count_;
  const QueueOptions queue_options_;
  VersionMetrics metrics_;  // the handles are constant; the metrics behind them are lock-free

  std::atomic<uint64_t> next_id_{1};  // queue entry ids; lock-free

  // For ExpectedLatency, lock-free: copies of what mu_ guards, and means of the recent executions.
  void RecordExecution(size_t requests, SteadyTime::duration took);
  std::atomic<uint64_t> queued_{0};           // queue_.size()
  std::atomic<uint64_t> running_{0};          // inflight_
  std::atomic<double> mean_batch_{0};         // requests per execution
  std::atomic<double> mean_execution_ns_{0};  // duration of an execution

  mutable std::mutex batch_stats_mu_;                // taken once per execution, alone
  std::map<uint64_t, BatchStatistics> batch_stats_;  // guarded by batch_stats_mu_; by batch size

  std::mutex mu_;
  std::condition_variable_any work_changed_;   // instances wait here for work
  std::condition_variable_any timer_wake_;     // the timer waits here for an earlier deadline or a cancellation
  bool stopping_ = false;                      // guarded by mu_
  uint64_t generation_ = 0;                    // guarded by mu_; bumped by every change of queue_ or a retries list
  bool timer_dirty_ = false;                   // guarded by mu_; the earliest deadline moved up
  RequestQueue queue_;                         // guarded by mu_
  std::vector<size_t> reported_depth_;         // guarded by mu_: what this scheduler added to each level's gauge
  size_t reported_pending_ = 0;                // guarded by mu_: what it added to nv_inference_pending_request_count
  QueueSnapshot snapshot_;                     // guarded by mu_; reused to spare allocations
  Entries cancelled_;                          // guarded by mu_; left the queue, to be answered by the timer
  size_t inflight_ = 0;                        // guarded by mu_; submitted executions not yet answered
  std::condition_variable_any inflight_done_;  // the destructor waits here for inflight_ == 0
  // Guarded by mu_; index = instance (replacements are appended: a deque keeps the references the instances'
  // threads hold). Retries are queued only while !stopping_ and by an execution still counted in inflight_, so once
  // the destructor has set stopping_ and taken them, no new one appears.
  std::deque<InstanceState> instances_;
  // Guarded by mu_: the executions under the watchdog (Options::execution_timeout), by deadline.
  std::multimap<SteadyTime, std::shared_ptr<InFlight>> watched_;
  size_t lent_ = 0;  // guarded by mu_: instances lent to submitting threads now
  // Guarded by mu_, with Options::callers_run_lone_requests: when the last request was admitted, and the mean time
  // between admissions (CallerRunFacts).
  std::optional<SteadyTime> last_admitted_;
  double mean_interval_ns_ = 0;
  size_t serving_ = 0;    // guarded by mu_: instances not quarantined
  size_t replacing_ = 0;  // guarded by mu_: replacements being created
  // Guarded by mu_: what replace_instance made. Kept until the destructor has joined every thread.
  std::vector<InstanceReplacement> replacements_;
  int64_t reported_cap_ = 0;  // guarded by mu_: what this scheduler last set weft_oom_batch_cap to

  // dynamic_batching { preserve_ordering: true }: answers leave in the order their requests were admitted, an
  // answer that is ready early waiting for the ones before it.
  const bool preserve_ordering_;
  // Whether there is one is fixed at construction; what it holds is guarded by mu_.
  std::optional<BatchTuner> tuner_;
  uint64_t next_order_ = 1;  // guarded by mu_: the order of the next admitted request
  struct HeldAnswer {
    std::unique_ptr<InferenceRequest> request;
    InferenceCallback on_done;
    Result<InferenceResponse> result;
  };
  std::mutex order_mu_;
  std::map<uint64_t, HeldAnswer> held_;  // guarded by order_mu_: ready answers by order
  uint64_t next_release_ = 1;            // guarded by order_mu_: the order answered next
  bool releasing_ = false;               // guarded by order_mu_: a thread is answering from held_

  std::vector<std::unique_ptr<InlineExecutor>> inline_executors_;  // when options_.executors is empty

  // Guarded by mu_ (a replacement adds threads while the scheduler runs; none once stopping_ is set). Started last,
  // joined first.
  std::vector<std::jthread> threads_;
};

}  // namespace weft
