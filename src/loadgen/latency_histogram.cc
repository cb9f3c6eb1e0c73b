#include "loadgen/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace weft {

namespace {

constexpr int kSubBucketBits = 7;                                                   // 128 buckets per power of two
constexpr uint64_t kSubBuckets = 1u << kSubBucketBits;                              // 128
constexpr uint64_t kExactLimit = 2 * kSubBuckets;                                   // values below are their own bucket
constexpr size_t kBucketCount = kExactLimit + (63 - kSubBucketBits) * kSubBuckets;  // exponents 8..63

}  // namespace

size_t LatencyHistogram::BucketOf(uint64_t value) {
  if (value < kExactLimit) return value;
  int exponent = 63 - std::countl_zero(value);  // >= kSubBucketBits + 1
  int shift = exponent - kSubBucketBits;
  uint64_t top = value >> shift;  // in [kSubBuckets, 2 * kSubBuckets)
  return kExactLimit + (exponent - kSubBucketBits - 1) * kSubBuckets + (top - kSubBuckets);
}

uint64_t LatencyHistogram::BucketLowest(size_t bucket) {
  if (bucket < kExactLimit) return bucket;
  size_t k = bucket - kExactLimit;
  int shift = static_cast<int>(k / kSubBuckets) + 1;
  uint64_t top = kSubBuckets + k % kSubBuckets;
  return top << shift;
}

uint64_t LatencyHistogram::BucketHighest(size_t bucket) {
  if (bucket < kExactLimit) return bucket;
  size_t k = bucket - kExactLimit;
  int shift = static_cast<int>(k / kSubBuckets) + 1;
  uint64_t top = kSubBuckets + k % kSubBuckets;
  return ((top + 1) << shift) - 1;  // for the last bucket this wraps to UINT64_MAX, as it should
}

LatencyHistogram::LatencyHistogram() : counts_(kBucketCount, 0) {}

void LatencyHistogram::Record(std::chrono::nanoseconds latency) {
  uint64_t value = latency.count() > 0 ? static_cast<uint64_t>(latency.count()) : 0;
  ++counts_[BucketOf(value)];
  ++count_;
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
  sum_ += static_cast<double>(value);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
  sum_ += other.sum_;
}

std::chrono::nanoseconds LatencyHistogram::min() const {
  return std::chrono::nanoseconds(count_ == 0 ? 0 : static_cast<int64_t>(min_));
}

std::chrono::nanoseconds LatencyHistogram::max() const { return std::chrono::nanoseconds(static_cast<int64_t>(max_)); }

std::chrono::nanoseconds LatencyHistogram::mean() const {
  return std::chrono::nanoseconds(count_ == 0 ? 0 : std::llround(sum_ / static_cast<double>(count_)));
}

std::chrono::nanoseconds LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return std::chrono::nanoseconds(0);
  q = std::clamp(q, 0.0, 1.0);
  // The rank of the order statistic, 1-based; the epsilon keeps 0.999 * 1000 at 999 despite rounding.
  double exact = q * static_cast<double>(count_);
  uint64_t rank = static_cast<uint64_t>(std::ceil(exact - 1e-9 * std::max(1.0, exact)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  if (rank == count_) return max();  // the top order statistic is known exactly
  uint64_t seen = 0;
  for (size_t b = 0; b < counts_.size(); ++b) {
    seen += counts_[b];
    if (seen >= rank) {
      uint64_t low = BucketLowest(b);
      uint64_t mid = low + (BucketHighest(b) - low) / 2;
      return std::chrono::nanoseconds(static_cast<int64_t>(std::clamp(mid, min_, max_)));
    }
  }
  return max();  // not reached: the counts add up to count_
}

}  // namespace weft
