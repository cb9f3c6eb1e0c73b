#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "model/model_config.h"

namespace weft {

// How a model's queued requests are grouped into executions. Built once from the model's config.
struct BatchPolicyOptions {
  // False: every execution runs exactly one request (models without dynamic_batching or max_batch_size 0).
  bool dynamic_batching = false;
  // The most batch items (the sum of the requests' first dimensions) one execution may hold.
  int64_t max_batch_size = 1;
  // Batch sizes worth dispatching at once; ascending, each in [1, max_batch_size].
  std::vector<int64_t> preferred_batch_sizes;
  // How long the oldest request of a batch may wait for the batch to grow.
  Micros max_queue_delay{0};
  // The most batch items for one instance while it recovers from running out of memory; 0 = none. Set by the
  // scheduler for a while after an instance ran out of memory on a larger batch (never by FromConfig); it acts as
  // max_batch_size when smaller.
  int64_t batch_cap = 0;

  static BatchPolicyOptions FromConfig(const ModelConfig& config);
};

// One queued request as the policy sees it.
struct QueuedRequest {
  int64_t batch_size = 1;
  // Requests join only when their keys are equal (same datatypes, same non-batch dims, same memory place).
  // A view: the snapshot's owner keeps the bytes alive while the policy runs.
  std::string_view batch_key;
  SteadyTime enqueued;
  std::optional<SteadyTime> deadline;
};

// The head of a model's queue, in dispatch order: priority level first, then earliest deadline, then arrival.
// It may be cut short, but it must hold every request that could join the first one's batch plus the one
// after them (max_batch_size + 1 requests are always enough).
struct QueueSnapshot {
  std::vector<QueuedRequest> requests;
};

struct BatchDecision {
  enum class Kind {
    kIdle,  // nothing is queued
    kRun,   // execute requests[0, count) now, as one batch
    kWait,  // nothing to run yet; decide again at wait_until (or sooner, when the queue changes)
  };
  Kind kind = Kind::kIdle;
  size_t count = 0;
  SteadyTime wait_until{};

  static BatchDecision Idle() { return {}; }
  static BatchDecision Run(size_t count) { return {Kind::kRun, count, {}}; }
  static BatchDecision Wait(SteadyTime until) { return {Kind::kWait, 0, until}; }
};

// Decides what a free instance should do with the queue `snapshot` at time `now`. Pure: no state, no clock,
// no locks; the same inputs always give the same answer.
//
// The batch is the longest run of requests from the head that share the head's key and fit in max_batch_size, or in
// batch_cap when one is set (requests never overtake one another to join a batch). It runs now when
//   - it cannot grow: the next request differs or does not fit, or it holds max_batch_size (batch_cap) items;
//   - it holds at least the largest preferred batch size (max_batch_size when none is configured);
//   - its oldest request has waited max_queue_delay (0 = never wait);
//   - waiting would carry one of its requests past its deadline.
// Otherwise the instance waits until the oldest request's delay runs out. When a batch runs and preferred sizes
// are configured, it is cut to its longest prefix whose size is a preferred size, if it has one; the rest
// stays queued.
BatchDecision DecideBatch(const QueueSnapshot& snapshot, SteadyTime now, const BatchPolicyOptions& options);

}  // namespace weft
