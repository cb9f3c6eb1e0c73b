#include "device/busy_time.h"

#include <algorithm>
#include <iterator>

namespace weft {

std::deque<BusyTime::Interval>::const_iterator BusyTime::FirstStartingAfter(SteadyTime t) const {
  return std::upper_bound(intervals_.begin(), intervals_.end(), t,
                          [](SteadyTime at, const Interval& i) { return at < i.start; });
}

void BusyTime::Add(SteadyTime start, SteadyTime end) {
  if (end <= start) return;
  // Merge with every interval that overlaps or touches [start, end].
  auto first = intervals_.begin() + (FirstStartingAfter(start) - intervals_.cbegin());
  if (first != intervals_.begin() && std::prev(first)->end >= start) --first;
  auto last = first;
  SteadyTime::duration merged{0};  // the length of the pieces absorbed, counted in total_ before
  for (; last != intervals_.end() && last->start <= end; ++last) {
    merged += last->end - last->start;
    start = std::min(start, last->start);
    end = std::max(end, last->end);
  }
  if (first == last) {
    intervals_.insert(first, Interval{start, end});
  } else {
    *first = Interval{start, end};
    intervals_.erase(std::next(first), last);
  }
  total_ += (end - start) - merged;
  latest_end_ = std::max(latest_end_, end);
  const SteadyTime cutoff = latest_end_ - horizon_;
  while (!intervals_.empty() && intervals_.front().end < cutoff) intervals_.pop_front();
}

SteadyTime::duration BusyTime::Covered(SteadyTime from, SteadyTime to) const {
  SteadyTime::duration covered{0};
  if (to <= from) return covered;
  auto it = FirstStartingAfter(from);
  if (it != intervals_.begin()) --it;
  for (; it != intervals_.end() && it->start < to; ++it) {
    const SteadyTime s = std::max(it->start, from);
    const SteadyTime e = std::min(it->end, to);
    if (e > s) covered += e - s;
  }
  return covered;
}

double BusyTime::Fraction(SteadyTime from, SteadyTime to) const {
  if (to <= from) return 0;
  return std::chrono::duration<double>(Covered(from, to)).count() / std::chrono::duration<double>(to - from).count();
}

}  // namespace weft
