#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/clock.h"

namespace weft {

// How the batch tuner measures and moves. The defaults are what the engine uses (src/scheduler/README.md, "Batch
// tuning").
struct BatchTunerOptions {
  // The config's max_batch_size (>= 2; with 1 there is nothing to tune).
  int64_t max_batch_size = 2;
  // Executions of one size before its figure counts.
  uint32_t min_samples = 5;
  // Executions a probe runs at the probed size.
  uint32_t probe_executions = 8;
  // Time between the end of one probe (or of a decision to skip one) and the next.
  std::chrono::milliseconds probe_interval{2000};
  // A size's figure older than this is measured again before it is trusted.
  std::chrono::milliseconds stale_after{30000};
  // A probe that has not finished in this long (the load fell) is given up; its size keeps what it measured.
  std::chrono::milliseconds probe_timeout{5000};
  // Another size replaces the cap only when its cost per item is lower by at least this fraction.
  double margin = 0.05;
};

// Chooses the largest batch a model's executions may hold (its cap) from what executions of each size cost, so
// that a model that batching slows down (a convnet on a CPU whose caches a batch of 8 overflows) runs the size
// with the lowest cost per item, and one that batching speeds up keeps its max_batch_size.
//
// Sizes form a ladder: 1, 2, 4, ... below max_batch_size, then max_batch_size. Only executions of exactly a
// ladder size are measured (an exponentially weighted mean of the time per item). The cap starts at
// max_batch_size, as Triton's is. While executions fill the cap (the queue is deep enough for the cap to matter),
// every probe_interval the tuner probes a neighbour of the cap whose figure is missing or stale: the cap moves to
// that size for probe_executions executions, then stays there if it cost less per item than the cap by the margin,
// and goes back otherwise. So the cap climbs or descends one rung per probe until neither neighbour is better, and
// follows the costs as they change (each neighbour is measured again once its figure is stale_after old).
//
// The tuner's decisions are pure functions of what it was told and the `now` passed in; it never reads a clock.
// Thread-compatible: the caller holds a mutex around every call.
class BatchTuner {
 public:
  explicit BatchTuner(BatchTunerOptions options);

  // The cap for a batch formed now: the probed size during a probe, else the chosen cap. May start a probe.
  int64_t Cap(SteadyTime now);

  // An execution of `items` items took `took` (from its first input copy to the backend's return). True when this
  // ended a probe, so the cap changed: instances waiting for a batch to fill should decide again.
  bool Observe(int64_t items, std::chrono::nanoseconds took, SteadyTime now);

  // The chosen cap, without probes.
  int64_t chosen() const { return rungs_[chosen_].items; }
  // The size being probed, if a probe runs.
  std::optional<int64_t> probing() const;
  // The measured cost per item of a ladder size, if it has min_samples executions.
  std::optional<std::chrono::nanoseconds> CostPerItem(int64_t items) const;
  const BatchTunerOptions& options() const { return options_; }

 private:
  struct Rung {
    int64_t items = 0;
    double ns_per_item = 0;  // weighted mean
    uint32_t samples = 0;    // saturates at min_samples
    SteadyTime measured{};   // the last sample
  };

  bool Trusted(const Rung& rung, SteadyTime now) const;
  std::optional<size_t> RungOf(int64_t items) const;
  // The rung to probe next to the chosen one, if either neighbour's figure is missing or stale.
  std::optional<size_t> NeighbourToProbe(SteadyTime now) const;
  // Moves chosen_ to `probed` when both figures are trusted and the probed one is cheaper by the margin. True when
  // it moved.
  bool Choose(size_t probed, SteadyTime now);
  bool EndProbe(SteadyTime now);

  const BatchTunerOptions options_;
  std::vector<Rung> rungs_;  // ascending; the last is max_batch_size
  size_t chosen_;
  std::optional<size_t> probe_;
  uint32_t probe_left_ = 0;
  SteadyTime probe_until_{};
  std::optional<SteadyTime> next_probe_;  // unset until the first Cap
};

}  // namespace weft
