#include "rollout/stage_recorder.h"

#include <algorithm>
#include <cmath>

#include "base/log.h"

namespace weft {
namespace {

// Adds one to `counter` unless it has reached `limit`; whether it did. Never goes past the limit, even briefly.
template <typename T>
bool IncrementBelow(std::atomic<T>& counter, T limit) {
  T current = counter.load(std::memory_order_relaxed);
  while (current < limit) {
    if (counter.compare_exchange_weak(current, current + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

size_t ArmIndex(RolloutArm arm) { return arm == RolloutArm::kPrimary ? 0 : 1; }

ArmFigures ArmSnapshot(const std::atomic<uint64_t>& requests, const std::atomic<uint64_t>& errors,
                       const LatencyRecorder& latency) {
  ArmFigures out;
  // Errors first: RecordAnswer counts the request before its error, so a snapshot never has more errors than
  // requests.
  out.errors = errors.load();
  out.requests = requests.load();
  out.p50_seconds = latency.Quantile(0.5);
  out.p99_seconds = latency.Quantile(0.99);
  return out;
}

// Comparisons beyond the kept ones count in the totals. Mismatches among them are divergences whatever the
// tolerance; the others could be judged only with the criteria and noise floor of the snapshot, which they were not
// kept for, so they are taken to diverge at the rate the kept ones (mismatches aside) do.
void AddNotKept(std::span<const Comparison> kept, uint64_t not_kept, uint64_t not_kept_mismatches,
                DivergenceFigures* figures) {
  if (not_kept == 0) return;
  const auto kept_mismatches =
      static_cast<uint64_t>(std::count_if(kept.begin(), kept.end(), [](const Comparison& c) { return c.mismatch; }));
  const uint64_t kept_numeric = figures->compared - kept_mismatches;
  const uint64_t kept_numeric_diverged = figures->diverged - kept_mismatches;
  const uint64_t not_kept_numeric = not_kept - not_kept_mismatches;
  uint64_t estimate = 0;
  if (kept_numeric > 0) {
    estimate =
        static_cast<uint64_t>(std::llround(static_cast<double>(kept_numeric_diverged) /
                                           static_cast<double>(kept_numeric) * static_cast<double>(not_kept_numeric)));
  }
  figures->compared += not_kept;
  figures->diverged += not_kept_mismatches + std::min(estimate, not_kept_numeric);
}

}  // namespace

void LatencyRecorder::Record(std::chrono::nanoseconds latency) {
  const double micros = static_cast<double>(latency.count()) / 1e3;
  size_t bucket = 0;
  if (micros >= 1) {
    const double index = std::floor(8 * std::log2(micros));
    bucket = static_cast<size_t>(std::min(index, static_cast<double>(kBuckets - 1)));
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
}

uint64_t LatencyRecorder::count() const {
  uint64_t total = 0;
  for (const auto& c : counts_) total += c.load(std::memory_order_relaxed);
  return total;
}

double LatencyRecorder::Quantile(double q) const {
  // One read of each bucket, so that the total and the walk agree while answers keep coming.
  std::array<uint64_t, kBuckets> counts;
  uint64_t total = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    counts[i] = counts_[i].load(std::memory_order_relaxed);
    total += counts[i];
  }
  if (total == 0) return 0;
  // The answer of rank ceil(q * total); q outside (0, 1] (or NaN) reads as the smallest or the largest answer.
  const double wanted = std::ceil(q * static_cast<double>(total));
  uint64_t target = 1;
  if (wanted >= static_cast<double>(total)) {
    target = total;
  } else if (wanted > 1) {
    target = static_cast<uint64_t>(wanted);
  }
  uint64_t cumulative = 0;
  size_t bucket = 0;
  for (; bucket < kBuckets; ++bucket) {
    cumulative += counts[bucket];
    if (cumulative >= target) break;
  }
  return std::exp2(static_cast<double>(bucket + 1) / 8) * 1e-6;
}

StageRecorder::StageRecorder(SteadyTime start, uint32_t shadow_max_in_flight)
    : start_(start), shadow_max_in_flight_(shadow_max_in_flight) {}

void StageRecorder::RecordAnswer(RolloutArm arm, bool error, std::chrono::nanoseconds latency) {
  Arm& a = arms_[ArmIndex(arm)];
  a.requests.fetch_add(1);
  if (error) a.errors.fetch_add(1);
  a.latency.Record(latency);
}

bool StageRecorder::TryStartShadow() {
  if (!IncrementBelow(shadow_in_flight_, shadow_max_in_flight_)) {
    shadow_dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  shadow_sent_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void StageRecorder::FinishShadow() {
  const uint32_t before = shadow_in_flight_.fetch_sub(1, std::memory_order_relaxed);
  WEFT_CHECK(before > 0) << "FinishShadow without a shadow copy in flight";
}

void StageRecorder::RecordComparison(const Comparison& comparison) {
  if (!comparison.compared && !comparison.mismatch) return;  // nothing in host memory: says nothing
  std::lock_guard lock(mu_);
  if (comparisons_.size() < kMaxKeptComparisons) {
    comparisons_.push_back(comparison);
    return;
  }
  ++comparisons_dropped_;
  mismatches_dropped_ += comparison.mismatch ? 1 : 0;
}

void StageRecorder::RecordNoise(const Comparison& comparison) {
  // The primary against itself in other types or shapes has no size of difference to give.
  if (!comparison.compared) return;
  std::lock_guard lock(mu_);
  ++noise_.compared;
  noise_.max_abs = std::max(noise_.max_abs, comparison.max_abs);
  noise_.max_rel = std::max(noise_.max_rel, comparison.max_rel);
}

bool StageRecorder::WantNoiseSample() {
  const uint64_t copy = shadow_started_.fetch_add(1, std::memory_order_relaxed);
  if (copy >= kNoiseSamplesFirst && copy % kNoiseSampleEvery != 0) return false;
  return IncrementBelow(noise_asked_, kMaxNoiseSamples);
}

StageFigures StageRecorder::Snapshot(const RolloutCriteria& criteria, SteadyTime now) const {
  StageFigures out;
  out.elapsed =
      std::max(std::chrono::nanoseconds(0), std::chrono::duration_cast<std::chrono::nanoseconds>(now - start_));
  const Arm& primary = arms_[ArmIndex(RolloutArm::kPrimary)];
  const Arm& candidate = arms_[ArmIndex(RolloutArm::kCandidate)];
  out.primary = ArmSnapshot(primary.requests, primary.errors, primary.latency);
  out.candidate = ArmSnapshot(candidate.requests, candidate.errors, candidate.latency);
  out.shadow_sent = shadow_sent_.load(std::memory_order_relaxed);
  out.shadow_dropped = shadow_dropped_.load(std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  out.noise = noise_;
  out.divergence = SummarizeDivergence(comparisons_, criteria, noise_);
  AddNotKept(comparisons_, comparisons_dropped_, mismatches_dropped_, &out.divergence);
  return out;
}

}  // namespace weft
