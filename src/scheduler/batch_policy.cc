#include "scheduler/batch_policy.h"

#include <algorithm>

namespace weft {

BatchPolicyOptions BatchPolicyOptions::FromConfig(const ModelConfig& config) {
  BatchPolicyOptions options;
  if (!config.dynamic_batching || config.max_batch_size <= 0) return options;
  const DynamicBatchingConfig& batching = *config.dynamic_batching;
  options.dynamic_batching = true;
  options.max_batch_size = config.max_batch_size;
  for (int size : batching.preferred_batch_size) {
    if (size >= 1 && size <= config.max_batch_size) options.preferred_batch_sizes.push_back(size);
  }
  std::sort(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end());
  options.preferred_batch_sizes.erase(
      std::unique(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end()),
      options.preferred_batch_sizes.end());
  options.max_queue_delay = Micros(batching.max_queue_delay_us);
  return options;
}

BatchDecision DecideBatch(const QueueSnapshot& snapshot, SteadyTime now, const BatchPolicyOptions& options) {
  const std::vector<QueuedRequest>& queue = snapshot.requests;
  if (queue.empty()) return BatchDecision::Idle();
  if (!options.dynamic_batching) return BatchDecision::Run(1);

  const int64_t max_items =
      options.batch_cap > 0 ? std::min(options.batch_cap, options.max_batch_size) : options.max_batch_size;
  // The joinable run from the head. A head too large to share an execution still runs, alone.
  const QueuedRequest& head = queue.front();
  size_t count = 0;
  int64_t items = 0;
  bool can_grow = true;
  SteadyTime oldest = head.enqueued;
  std::optional<SteadyTime> earliest_deadline;
  for (const QueuedRequest& r : queue) {
    if (r.batch_key != head.batch_key || items + r.batch_size > max_items) {
      can_grow = false;
      break;
    }
    ++count;
    items += r.batch_size;
    oldest = std::min(oldest, r.enqueued);
    if (r.deadline && (!earliest_deadline || *r.deadline < *earliest_deadline)) earliest_deadline = r.deadline;
  }
  if (count == 0) return BatchDecision::Run(1);
  if (items >= max_items) can_grow = false;

  const int64_t enough =
      options.preferred_batch_sizes.empty() ? options.max_batch_size : options.preferred_batch_sizes.back();
  const SteadyTime wait_until = oldest + options.max_queue_delay;
  const bool run =
      !can_grow || items >= enough || now >= wait_until || (earliest_deadline && *earliest_deadline <= wait_until);
  if (!run) return BatchDecision::Wait(wait_until);

  if (!options.preferred_batch_sizes.empty()) {
    // Cut to the longest prefix of a preferred size; the requests behind it keep their place in the queue.
    int64_t prefix_items = 0;
    size_t best = 0;
    for (size_t i = 0; i < count; ++i) {
      prefix_items += queue[i].batch_size;
      if (std::binary_search(options.preferred_batch_sizes.begin(), options.preferred_batch_sizes.end(),
                             prefix_items)) {
        best = i + 1;
      }
    }
    if (best > 0) count = best;
  }
  return BatchDecision::Run(count);
}

}  // namespace weft
