#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Monotonic counter. Lock-free, thread-safe.
class Counter {
 public:
  void Increment(double by = 1) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down. Lock-free, thread-safe.
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by) { value_.fetch_add(by, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Cumulative histogram with fixed upper bounds (plus +Inf). Lock-free, thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Counts per bucket (not cumulative), the last one for +Inf; the sum; the total count.
  std::vector<uint64_t> BucketCounts() const;
  double sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<double> sum_{0};
  std::atomic<uint64_t> count_{0};
};

// Latency buckets in seconds, from 50 µs to 10 s.
std::vector<double> LatencyBuckets();

// Owns every metric; hands out stable pointers that stay valid for the registry's life. Getting a metric takes a
// lock, so callers keep the pointer; updating it does not. Renders the Prometheus text exposition format.
class MetricsRegistry {
 public:
  Counter* GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, const Labels& labels = {},
                          std::vector<double> bounds = LatencyBuckets());

  // Drops one series of `name` (any type) whose labels are exactly `labels`, so that a thing that is gone (a model
  // version unloaded) stops being exported. The pointers handed out for that series dangle afterwards: only their
  // owner may remove it, once it no longer uses them.
  void Remove(const std::string& name, const Labels& labels);

  // Every family but those whose name starts with `skip_prefix` (when not empty).
  std::string Exposition(std::string_view skip_prefix = {}) const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& GetFamily(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;  // guarded by mu_
};

}  // namespace weft
