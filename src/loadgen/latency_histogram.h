#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace weft {

// Latencies in nanoseconds in log-linear buckets (the HDR histogram layout): exact below 256 ns, then 128
// buckets per power of two, so that any recorded value is known within 1/128 of itself and a percentile, read
// as its bucket's midpoint, is within 0.4% of the true order statistic. Memory is fixed (~60 KiB) whatever the
// request count or run length, histograms merge exactly across threads, and recording is an increment; a vector
// of every latency would grow with the run (480 MB for 100k req/s over ten minutes) for precision nobody reads.
// Thread-compatible.
class LatencyHistogram {
 public:
  LatencyHistogram();

  void Record(std::chrono::nanoseconds latency);
  void Merge(const LatencyHistogram& other);

  uint64_t count() const { return count_; }
  std::chrono::nanoseconds min() const;  // 0 when empty
  std::chrono::nanoseconds max() const;  // exact
  std::chrono::nanoseconds mean() const;
  // The value at quantile q in [0, 1]: the smallest recorded value v such that at least q of the values are
  // <= v, within the bucket error and clamped to [min, max]. Monotone in q; 0 when empty.
  std::chrono::nanoseconds Percentile(double q) const;

  // The bucket layout, exposed for tests.
  static size_t BucketOf(uint64_t value);
  static uint64_t BucketLowest(size_t bucket);
  static uint64_t BucketHighest(size_t bucket);

 private:
  std::vector<uint64_t> counts_;
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  double sum_ = 0;  // nanoseconds; the mean needs no integer exactness
};

}  // namespace weft
