#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/clock.h"
#include "rollout/rollout_decision.h"

namespace weft {

enum class RolloutArm { kPrimary, kCandidate };

// Latencies in logarithmic buckets (eight per doubling, from 1 µs to about 70 minutes): about 9% resolution, lock-free
// to record. Thread-safe.
class LatencyRecorder {
 public:
  void Record(std::chrono::nanoseconds latency);
  uint64_t count() const;
  // The q-quantile (0 < q <= 1) in seconds, at the upper edge of its bucket; 0 when empty.
  double Quantile(double q) const;

 private:
  static constexpr size_t kBuckets = 256;
  std::array<std::atomic<uint64_t>, kBuckets> counts_{};
};

// What one stage of a rollout observes, fed by the engine's completions (any thread) and read by the rollout's
// controller. One per stage: a new stage starts a new recorder, and answers to requests routed under the old one
// still land in the old one. Thread-safe; recording an answer takes no lock.
class StageRecorder {
 public:
  StageRecorder(SteadyTime start, uint32_t shadow_max_in_flight);

  // An answer of an arm: ok, or an error (`error`). The engine records neither cancellations nor superseded frames.
  void RecordAnswer(RolloutArm arm, bool error, std::chrono::nanoseconds latency);

  // A shadow copy may go out: false when shadow_max_in_flight are already out (the copy is dropped and counted).
  bool TryStartShadow();
  // A copy that went out is answered (or failed to start).
  void FinishShadow();
  // The primary's answer against the candidate's to the same copy. At most kMaxKeptComparisons are kept for
  // judging; later ones still count in the totals (compared, mismatches).
  void RecordComparison(const Comparison& comparison);
  // The primary against itself on a repeated input.
  void RecordNoise(const Comparison& comparison);
  // Whether the next shadow copy should also be run on the primary again to measure the noise floor: the first
  // kNoiseSamplesFirst copies, then one in kNoiseSampleEvery, up to kMaxNoiseSamples. Each is one more execution on
  // the primary, in its clients' queue: rare, so that the primary's tail does not pay for it.
  bool WantNoiseSample();

  StageFigures Snapshot(const RolloutCriteria& criteria, SteadyTime now) const;
  SteadyTime start() const { return start_; }

  static constexpr size_t kMaxKeptComparisons = 20000;
  static constexpr uint64_t kNoiseSamplesFirst = 20;
  static constexpr uint64_t kNoiseSampleEvery = 1000;
  static constexpr uint64_t kMaxNoiseSamples = 100;

 private:
  struct Arm {
    std::atomic<uint64_t> requests{0};
    std::atomic<uint64_t> errors{0};
    LatencyRecorder latency;
  };
  const SteadyTime start_;
  const uint32_t shadow_max_in_flight_;
  std::array<Arm, 2> arms_;
  std::atomic<uint32_t> shadow_in_flight_{0};
  std::atomic<uint64_t> shadow_sent_{0};
  std::atomic<uint64_t> shadow_dropped_{0};
  std::atomic<uint64_t> noise_asked_{0};
  std::atomic<uint64_t> shadow_started_{0};

  mutable std::mutex mu_;
  std::vector<Comparison> comparisons_;  // guarded by mu_
  uint64_t comparisons_dropped_ = 0;     // guarded by mu_: not kept, beyond kMaxKeptComparisons
  uint64_t mismatches_dropped_ = 0;      // guarded by mu_: of those, mismatches
  NoiseFigures noise_;                   // guarded by mu_
};

}  // namespace weft
