#include "scheduler/batch_tuner.h"

#include <algorithm>

#include "base/log.h"

namespace weft {
namespace {

// The weight of a new sample in a size's mean: the last 8 or so executions count.
constexpr double kSampleWeight = 0.25;

}  // namespace

BatchTuner::BatchTuner(BatchTunerOptions options) : options_(options) {
  WEFT_CHECK(options_.max_batch_size >= 2 && options_.min_samples >= 1 && options_.probe_executions >= 1)
      << "batch tuner options out of range";
  for (int64_t items = 1; items < options_.max_batch_size; items *= 2) rungs_.push_back({.items = items});
  rungs_.push_back({.items = options_.max_batch_size});
  chosen_ = rungs_.size() - 1;
}

int64_t BatchTuner::Cap(SteadyTime now) {
  if (!next_probe_) next_probe_ = now + options_.probe_interval;
  if (probe_ && now >= probe_until_) EndProbe(now);
  if (probe_) return rungs_[*probe_].items;
  if (now >= *next_probe_) {
    next_probe_ = now + options_.probe_interval;
    // Only while executions fill the cap: below it, the cap changes nothing and a probe would measure nothing.
    const Rung& cap = rungs_[chosen_];
    const bool filled = cap.samples > 0 && now - cap.measured <= options_.probe_interval;
    if (std::optional<size_t> next = filled ? NeighbourToProbe(now) : std::nullopt) {
      probe_ = next;
      probe_left_ = options_.probe_executions;
      probe_until_ = now + options_.probe_timeout;
      rungs_[*next].samples = 0;  // measured afresh: its old figure may be from another load
      return rungs_[*next].items;
    }
  }
  return rungs_[chosen_].items;
}

bool BatchTuner::Observe(int64_t items, std::chrono::nanoseconds took, SteadyTime now) {
  const std::optional<size_t> index = RungOf(items);
  if (!index) return false;
  Rung& rung = rungs_[*index];
  const double per_item = static_cast<double>(std::max<int64_t>(1, took.count())) / static_cast<double>(items);
  rung.ns_per_item = rung.samples == 0 ? per_item : rung.ns_per_item + kSampleWeight * (per_item - rung.ns_per_item);
  rung.samples = std::min(rung.samples + 1, options_.min_samples);
  rung.measured = now;
  return probe_ && *probe_ == *index && --probe_left_ == 0 && EndProbe(now);
}

std::optional<int64_t> BatchTuner::probing() const {
  if (!probe_) return std::nullopt;
  return rungs_[*probe_].items;
}

std::optional<std::chrono::nanoseconds> BatchTuner::CostPerItem(int64_t items) const {
  const std::optional<size_t> index = RungOf(items);
  if (!index || rungs_[*index].samples < options_.min_samples) return std::nullopt;
  return std::chrono::nanoseconds(static_cast<int64_t>(rungs_[*index].ns_per_item));
}

bool BatchTuner::Trusted(const Rung& rung, SteadyTime now) const {
  return rung.samples >= options_.min_samples && now - rung.measured <= options_.stale_after;
}

std::optional<size_t> BatchTuner::RungOf(int64_t items) const {
  auto it = std::lower_bound(rungs_.begin(), rungs_.end(), items,
                             [](const Rung& rung, int64_t wanted) { return rung.items < wanted; });
  if (it == rungs_.end() || it->items != items) return std::nullopt;
  return static_cast<size_t>(it - rungs_.begin());
}

std::optional<size_t> BatchTuner::NeighbourToProbe(SteadyTime now) const {
  std::optional<size_t> pick;
  auto consider = [&](size_t index) {
    const Rung& rung = rungs_[index];
    if (Trusted(rung, now)) return;
    // The one measured longest ago (never measured counts as longest).
    if (!pick || rung.samples == 0 || rung.measured < rungs_[*pick].measured) pick = index;
  };
  if (chosen_ + 1 < rungs_.size()) consider(chosen_ + 1);
  if (chosen_ > 0) consider(chosen_ - 1);
  return pick;
}

bool BatchTuner::Choose(size_t probed, SteadyTime now) {
  // Only the probed size against the cap, both measured just now: a figure from another time may be from another
  // load (or another model on the same cores), and comparing every size at every execution made the cap flap
  // between sizes whose costs differ by less than their noise.
  if (!Trusted(rungs_[chosen_], now) || !Trusted(rungs_[probed], now)) return false;
  if (rungs_[probed].ns_per_item > rungs_[chosen_].ns_per_item * (1 - options_.margin)) return false;
  chosen_ = probed;
  return true;
}

bool BatchTuner::EndProbe(SteadyTime now) {
  const size_t probed = *probe_;
  probe_.reset();
  probe_left_ = 0;
  next_probe_ = now + options_.probe_interval;
  Choose(probed, now);
  return true;  // the cap leaves the probed size (or stays there, chosen)
}

}  // namespace weft
