#include "device/busy_time.h"

#include <algorithm>
#include <iterator>

namespace weft {

void BusyTime::Add(SteadyTime start, SteadyTime end) {
  if (end <= start) return;
  // Merge with every interval that overlaps or touches [start, end].
  auto it = intervals_.upper_bound(start);
  if (it != intervals_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= start) it = prev;
  }
  SteadyTime::duration merged{0};  // the length of the pieces absorbed, counted in total_ before
  while (it != intervals_.end() && it->first <= end) {
    merged += it->second - it->first;
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = intervals_.erase(it);
  }
  intervals_.emplace(start, end);
  total_ += (end - start) - merged;
  latest_end_ = std::max(latest_end_, end);
  const SteadyTime cutoff = latest_end_ - horizon_;
  while (!intervals_.empty() && intervals_.begin()->second < cutoff) intervals_.erase(intervals_.begin());
}

SteadyTime::duration BusyTime::Covered(SteadyTime from, SteadyTime to) const {
  SteadyTime::duration covered{0};
  if (to <= from) return covered;
  auto it = intervals_.upper_bound(from);
  if (it != intervals_.begin()) --it;
  for (; it != intervals_.end() && it->first < to; ++it) {
    const SteadyTime s = std::max(it->first, from);
    const SteadyTime e = std::min(it->second, to);
    if (e > s) covered += e - s;
  }
  return covered;
}

double BusyTime::Fraction(SteadyTime from, SteadyTime to) const {
  if (to <= from) return 0;
  return std::chrono::duration<double>(Covered(from, to)).count() / std::chrono::duration<double>(to - from).count();
}

}  // namespace weft
