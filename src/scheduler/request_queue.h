#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/model_config.h"
#include "model/request.h"
#include "scheduler/batch_policy.h"
#include "scheduler/byte_budget.h"

namespace weft {

// How one priority level treats its requests: Triton's ModelQueuePolicy, normalized.
struct LevelPolicy {
  QueuePolicyConfig::TimeoutAction timeout_action = QueuePolicyConfig::TimeoutAction::kReject;
  Micros default_timeout{0};           // 0 = none
  bool allow_timeout_override = true;  // a request's own deadline may shorten the default
  size_t max_queue_size = 0;           // 0 = unbounded
};

struct QueueOptions {
  std::vector<LevelPolicy> levels = {LevelPolicy{}};  // levels[0] is priority 1, the highest
  uint32_t default_level = 1;                         // for requests with priority 0 or out of range
  size_t max_total = 0;                               // requests over all levels; 0 = unbounded
  bool latest_frame_wins = false;

  // Levels and policies from the config's dynamic_batching. Without it there is one level, no default timeout,
  // and a request's own deadline applies as it is. With it, Triton's rules hold: a request's deadline counts
  // only where allow_timeout_override is set, and then only when it is earlier than the level's default.
  // latest_frame_wins comes from the config parameter "weft.latest_frame_wins" = "true".
  static QueueOptions FromConfig(const ModelConfig& config, size_t max_total);
};

// The bound on a version's queued requests when the operator set none (no --max-queue-per-model, no max_queue_size
// in the config): 16 full batches for each instance, at least 64. An unbounded queue under overload turns every
// answer into a timeout (p50 9.7 s at 3x capacity in a probe); this one keeps the queueing delay near 16 batch
// times, turns the excess into fast 429s that clients retry, and at 64 lets a closed-loop client of 64
// connections queue without a refusal.
size_t DefaultQueueBound(const ModelConfig& config);
// Whether the config bounds some priority level itself (a max_queue_size): then no default bound is added.
bool ConfigBoundsQueue(const ModelConfig& config);

// One admitted request waiting for an execution, with everything the scheduler decided about it.
struct QueueEntry {
  uint64_t id = 0;
  std::unique_ptr<InferenceRequest> request;
  std::vector<Tensor> inputs;  // validated, in config order, framework shapes
  InferenceCallback on_done;

  uint32_t level = 1;                  // 1 = highest
  std::optional<SteadyTime> deadline;  // the effective one, after the level's policy
  bool delayed = false;                // its deadline passed in a DELAY level: it runs after the on-time ones
  SteadyTime enqueued;
  std::chrono::nanoseconds queued{0};  // from enqueued to its first dispatch
  int64_t batch_size = 1;
  std::string batch_key;  // see QueuedRequest::batch_key
  std::string source;     // latest frame wins; empty = none
  ByteReservation bytes;  // given back when the request leaves the queue
  uint64_t order = 0;     // preserve_ordering: its place in admission order, from 1; 0 = answered as it comes
  std::unique_ptr<CancelRegistration> cancel_registration;
};

// The requests of one model that have not started: a queue per priority level, each ordered by deadline
// (requests without one after those with one, then by arrival), an index of deadlines, and the latest
// request of each source. Holds no lock and reads no clock: the caller passes `now`. Thread-compatible.
class RequestQueue {
 public:
  explicit RequestQueue(QueueOptions options);

  const QueueOptions& options() const { return options_; }
  uint32_t levels() const { return static_cast<uint32_t>(options_.levels.size()); }
  size_t size() const { return entries_.size(); }
  size_t size(uint32_t level) const { return by_level_[level - 1].size(); }

  // The level (1-based) that serves `request`: its priority when in range, else the default level.
  uint32_t LevelOf(const InferenceRequest& request) const;
  // The deadline of a request admitted at `now` into `level`, after the level's policy.
  std::optional<SteadyTime> DeadlineOf(const InferenceRequest& request, uint32_t level, SteadyTime now) const;
  const LevelPolicy& policy(uint32_t level) const { return options_.levels[level - 1]; }
  // OK when one more request fits into `level`, counting `leaving` (a queued request that is about to be
  // replaced) as gone; ResourceExhausted naming the limit otherwise.
  Status HasRoom(uint32_t level, std::optional<uint64_t> leaving) const;
  // The queued request from `source`, if any.
  std::optional<uint64_t> FindSource(const std::string& source) const;

  // Queues an entry whose id is new and whose level, deadline, delayed and enqueued fields are set.
  void Push(std::unique_ptr<QueueEntry> entry);
  // Removes a queued request; null when it is not queued (it started, or left already).
  std::unique_ptr<QueueEntry> Remove(uint64_t id);
  // Handles every deadline at or before `now`: requests of REJECT levels leave the queue and are appended to
  // `expired`; those of DELAY levels move behind their level's on-time requests. Returns whether anything
  // changed.
  bool Expire(SteadyTime now, std::vector<std::unique_ptr<QueueEntry>>* expired);
  // The earliest deadline still to handle.
  std::optional<SteadyTime> NextDeadline() const;

  // The first `max` requests in dispatch order. The snapshot views the entries' keys: it is valid until the
  // queue changes.
  void Snapshot(size_t max, QueueSnapshot* snapshot) const;
  // Removes the first `count` requests in dispatch order and appends them to `out`.
  void PopFront(size_t count, std::vector<std::unique_ptr<QueueEntry>>* out);
  // Removes everything, in dispatch order.
  std::vector<std::unique_ptr<QueueEntry>> TakeAll();

 private:
  struct OrderKey {
    bool delayed;
    SteadyTime deadline;  // SteadyTime::max() when none
    uint64_t id;
    auto operator<=>(const OrderKey&) const = default;
  };
  static OrderKey KeyOf(const QueueEntry& entry);
  std::unique_ptr<QueueEntry> Erase(QueueEntry* entry);

  const QueueOptions options_;
  std::unordered_map<uint64_t, std::unique_ptr<QueueEntry>> entries_;
  std::vector<std::map<OrderKey, QueueEntry*>> by_level_;  // index = level - 1
  std::set<std::pair<SteadyTime, uint64_t>> deadlines_;    // on-time requests that have a deadline
  std::unordered_map<std::string, uint64_t> by_source_;
};

// The request's "source" parameter (a string, or an integer rendered as one); empty when absent.
std::string SourceOf(const InferenceRequest& request);

}  // namespace weft
