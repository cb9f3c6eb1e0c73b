#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "device/busy_time.h"
#include "device/device.h"
#include "metrics/metrics.h"
#include "model/backend.h"
#include "model/model_config.h"
#include "multiplexer/stream_load.h"

namespace weft {

// A model's class on the device, from `optimization { priority }`: PRIORITY_MAX -> high, PRIORITY_MIN -> best
// effort, anything else -> normal.
enum class PriorityClass : uint8_t { kHigh = 0, kNormal = 1, kBestEffort = 2 };
PriorityClass ClassOf(ModelPriority priority);
std::string_view PriorityClassName(PriorityClass c);

struct MultiplexerOptions {
  int streams_per_class = 2;  // streams of each class on the device
  // Device stream priorities by class (high, normal, low). Off: every stream gets the normal priority, so a free
  // CPU worker serves ready streams in arrival order and the GPU gets no hint.
  bool stream_priorities = true;
  // One stream shared by every instance of every class, in FIFO order: the serialized baseline of benchmarks.
  bool single_stream = false;
  // Batches in flight per instance of the high and normal classes. 0 = the device's default: 2 on CUDA (the host
  // launches the next batch while the GPU runs the current one) and for the high class everywhere (its next batch
  // waits on its stream, so a CPU worker that ends one goes on with the next); 1 for the normal class on the CPU
  // device (a second batch would only be a smaller batch formed early).
  int max_inflight = 0;
  // Batches in flight per best-effort instance, gated on completions; a model's parameter
  // weft.max_inflight_batches overrides it. 0 = no bound.
  int best_effort_max_inflight = 1;
  // Batches in flight over all best-effort instances of the device. 0 = no bound.
  int best_effort_budget = 0;
  // Moves an instance to a less loaded stream of its class at a batch boundary when the load of its stream (the
  // average number of batches on it, waiting or running: about the busy fraction while nothing waits) exceeds the
  // other's by `balance_threshold` and by more than the instance's own load (a move that only
  // carries the load across would gain nothing), at most one instance of a class per `balance_interval` (so that
  // instances do not all follow the same reading at once).
  bool load_balance = true;
  SteadyTime::duration balance_interval = std::chrono::milliseconds(200);
  double balance_threshold = 0.25;
  SteadyTime::duration load_time_constant = std::chrono::seconds(1);  // of each stream's and instance's EWMA load
  // Busy fractions are exported over this window, refreshed twice per window.
  SteadyTime::duration metrics_window = std::chrono::seconds(1);
  // How long busy intervals are kept for BusyFraction() queries.
  SteadyTime::duration busy_horizon = std::chrono::seconds(10);
};

// What a batch's completion reports to its submitter.
struct BatchTiming {
  SteadyTime start;  // the device began the batch
  SteadyTime end;    // and finished it
  // The stream it ran on and its device, by name; valid during the completion callback.
  const std::string* stream = nullptr;
  const std::string* device = nullptr;
};
using BatchDone = std::function<void(Result<std::vector<Tensor>> outputs, const BatchTiming& timing)>;

// What the thread that submits a batch may do itself, when the device would start the batch at once.
enum class OnSubmitter : uint8_t {
  kNothing,         // the device's own threads run the batch and its completion
  kRun,             // run the batch (Work::may_run_on_caller), for a thread that would only wait for it
  kRunAndComplete,  // run it and then its completion (Work::complete_on_caller), for one with nothing else to do
};

class Multiplexer;

// One instance's way onto the device: the stream it is assigned to, its batches in flight, its moves between
// streams. The instance's batches run in submission order even across a move: the first batch on the new stream
// waits on an event recorded after the last one on the old stream. Submit is called by one thread (the instance's
// runner); the rest is thread-safe. Destroying a lane waits for its batches in flight.
class Lane {
 public:
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Blocks until the instance may put one more batch in flight: under its own bound and, for a best-effort
  // instance, the device's best-effort budget. False when `stop` was requested first.
  bool AcquireSlot(std::stop_token stop);
  // The same without blocking; false when no slot is free now.
  bool TryAcquireSlot();
  // Gives back a slot acquired but not used.
  void ReleaseSlot();
  // Uses an acquired slot: runs the instance on `inputs` on its stream after every batch submitted before, and
  // calls `done` once, on the device's completion thread (or on this one: `on_submitter`), with the outputs
  // (complete by then) and the device time. The inputs are held until then. The slot is released after `done`
  // returns. A `background` batch (one no
  // client waits for) runs on the device's background stream, on capacity nothing else wants (StreamOptions::idle),
  // still in order with the instance's other batches.
  void Submit(std::vector<Tensor> inputs, BatchDone done, OnSubmitter on_submitter = OnSubmitter::kNothing,
              bool background = false);

  // Moves the instance to stream `index` of its class now; its next batch waits for the last one. For tests and
  // the balancer.
  void MoveTo(size_t index);

  PriorityClass priority_class() const { return class_; }
  int max_inflight() const { return max_inflight_; }
  int inflight() const;
  std::string stream_name() const;
  uint64_t migrations() const;

 private:
  friend class Multiplexer;
  struct ModelStats;
  Lane(Multiplexer* mux, ModelInstance* instance, PriorityClass c, int max_inflight, std::unique_ptr<Event> moved,
       ModelStats* model, Counter* migrations);
  // Moves to the least loaded stream of the class when the balancer says so.
  void MaybeRebalanceLocked(SteadyTime now);
  // Takes the multiplexer's mu_.
  void MoveToLocked(size_t index, SteadyTime now);

  Multiplexer* const mux_;
  ModelInstance* const instance_;
  const PriorityClass class_;
  const int max_inflight_;              // INT32_MAX when unbounded
  const std::unique_ptr<Event> moved_;  // recorded on the stream a batch leaves, waited on by the one it goes to
  ModelStats* const model_;
  Counter* const migrations_counter_;

  mutable std::mutex mu_;
  std::condition_variable_any slot_free_;
  int slots_ = 0;                  // guarded by mu_; acquired, in flight or not
  size_t stream_ = 0;              // guarded by mu_; index into the class's streams
  uint64_t migrations_ = 0;        // guarded by mu_
  SteadyTime last_balance_{};      // guarded by mu_
  Stream* last_stream_ = nullptr;  // guarded by mu_; where the instance's latest batch went
  StreamLoad load_;                // guarded by the multiplexer's mu_: this instance's own share of its streams' load
};

// A stream pool per device with three priority classes (high, normal, best effort) and the assignment of model
// instances to streams, weighted by each stream's measured load, plus one background stream for batches no client
// waits for. See src/multiplexer/README.md. Thread-safe.
// Every lane must be destroyed before the multiplexer; the device must outlive it.
class Multiplexer {
 public:
  // Creates the streams. Errors come from the device.
  static Result<std::unique_ptr<Multiplexer>> Create(Device* device, MultiplexerOptions options,
                                                     MetricsRegistry* metrics);
  ~Multiplexer();
  Multiplexer(const Multiplexer&) = delete;
  Multiplexer& operator=(const Multiplexer&) = delete;

  // A lane for one instance of `config` (version `version`), on the least loaded stream of the model's class.
  // InvalidArgument for a bad weft.max_inflight_batches parameter.
  Result<std::unique_ptr<Lane>> AddInstance(const ModelConfig& config, int64_t version, ModelInstance* instance);

  Device& device() { return *device_; }
  const MultiplexerOptions& options() const { return options_; }

  struct StreamStats {
    std::string name;  // "<class>/<index>", or "shared/0"
    PriorityClass priority_class;
    double load = 0;           // EWMA of the batches on the stream (waiting or running)
    double busy_fraction = 0;  // over the metrics window
    size_t queue_depth = 0;    // batches submitted, completion not yet fired
    int instances = 0;
  };
  std::vector<StreamStats> Stats() const;
  // The union of every stream's busy intervals inside [from, to], over its length (kept for busy_horizon).
  double BusyFraction(SteadyTime from, SteadyTime to) const;
  // The busy fraction of one model version's batches inside [from, to]; 0 when it has not run.
  double ModelBusyFraction(const std::string& model, int64_t version, SteadyTime from, SteadyTime to) const;
  int best_effort_inflight() const;

 private:
  friend class Lane;
  struct PooledStream {
    std::unique_ptr<Stream> stream;
    PriorityClass priority_class;
    std::string name;
    StreamLoad load;    // guarded by mu_
    BusyTime busy;      // guarded by mu_
    int instances = 0;  // guarded by mu_
    Gauge* busy_fraction = nullptr;
    Counter* busy_seconds = nullptr;
    Gauge* queue_depth = nullptr;
    Gauge* instance_count = nullptr;
    Gauge* load_gauge = nullptr;
  };

  Multiplexer(Device* device, MultiplexerOptions options, MetricsRegistry* metrics);
  Status CreateStreams();
  std::vector<PooledStream*>& StreamsOf(PriorityClass c);
  // The index of the least loaded stream of `c` (ties: fewer instances, then lower index).
  size_t LeastLoadedLocked(PriorityClass c, SteadyTime now);
  // Drops the series and the stats of a model version whose last lane is gone.
  void ForgetModelLocked(Lane::ModelStats* stats);
  // On the thread that runs the batch's completion.
  // `own_stream`: the batch ran on the lane's stream of its class, not on the background stream.
  void OnBatchDone(PooledStream* stream, Lane* lane, SteadyTime submitted, const Completion& completion,
                   bool own_stream);
  bool AcquireBudget(std::stop_token stop);
  bool TryAcquireBudget();
  void ReleaseBudget();
  void RefreshMetrics(std::stop_token stop);

  // Constant after construction.
  Device* const device_;
  const MultiplexerOptions options_;
  MetricsRegistry* const metrics_;
  Gauge* device_busy_fraction_ = nullptr;
  Gauge* best_effort_inflight_gauge_ = nullptr;
  std::vector<std::unique_ptr<PooledStream>> streams_;
  std::vector<PooledStream*> by_class_[3];  // the shared stream sits in every class when single_stream
  PooledStream* background_ = nullptr;      // an idle stream in no class; the shared stream when single_stream

  mutable std::mutex mu_;
  BusyTime device_busy_;                                                                 // guarded by mu_
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<Lane::ModelStats>> models_;  // guarded by mu_
  int lanes_ = 0;                                                                        // guarded by mu_
  SteadyTime last_move_[3] = {};  // guarded by mu_: the balancer's latest move in each class

  mutable std::mutex budget_mu_;
  std::condition_variable_any budget_free_;
  int best_effort_inflight_ = 0;  // guarded by budget_mu_

  std::jthread metrics_thread_;  // started last, joined first
};

}  // namespace weft
