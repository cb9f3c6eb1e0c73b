#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "base/clock.h"

namespace weft {

// What the allocator reports at one look: how many large allocations it has served so far, and how many bytes of
// freed pages it still holds (dirty: they cost resident memory, and reusing them costs no page fault).
struct AllocatorActivity {
  uint64_t large_allocations = 0;
  size_t dirty_bytes = 0;
};

// Decides when freed pages go back to the system. While large allocations go on (request bodies, tensors), the
// pages are kept for reuse: a fresh page costs a fault on first touch, and purging between requests of 16 MB had
// cut gRPC's rate to a quarter (docs/benchmarks.md). Once no large allocation has happened for `quiet`, the held
// pages are given back; so are they, at once, when they pass `most_dirty_bytes`. Pure: fed a snapshot and the time.
class IdlePurgePolicy {
 public:
  IdlePurgePolicy(std::chrono::milliseconds quiet, size_t least_dirty_bytes, size_t most_dirty_bytes)
      : quiet_(quiet), least_dirty_bytes_(least_dirty_bytes), most_dirty_bytes_(most_dirty_bytes) {}

  // True when the held pages should be purged now.
  bool Observe(AllocatorActivity activity, SteadyTime now);

 private:
  std::chrono::milliseconds quiet_;
  size_t least_dirty_bytes_;
  size_t most_dirty_bytes_;
  std::optional<uint64_t> last_large_allocations_;
  SteadyTime last_change_{};
};

}  // namespace weft
