#include "base/idle_purge_policy.h"

namespace weft {

bool IdlePurgePolicy::Observe(AllocatorActivity activity, SteadyTime now) {
  if (!last_large_allocations_ || *last_large_allocations_ != activity.large_allocations) {
    last_large_allocations_ = activity.large_allocations;
    last_change_ = now;
  }
  if (activity.dirty_bytes >= most_dirty_bytes_) return true;
  return activity.dirty_bytes >= least_dirty_bytes_ && now - last_change_ >= quiet_;
}

}  // namespace weft
