#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"

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

// Quantiles of what was observed in the last `max_age` (Prometheus's summary type, as Triton exports latencies with
// --metrics-config summary_latencies=true). The window is `age_buckets` slices of max_age / age_buckets each; the
// oldest slice drops out as time passes. A slice counts values in log-linear buckets, 64 per power of two, so a
// quantile is the middle of the bucket that holds it: within 0.8% of a value observed. Values at or below 0 count as
// 0. Sum and count cover all time, as Prometheus's summaries report them. Thread-safe: one short lock per call.
class Summary {
 public:
  struct Options {
    std::vector<double> quantiles = {0.5, 0.9, 0.95, 0.99};  // each in [0, 1]
    std::chrono::nanoseconds max_age = std::chrono::minutes(1);
    int age_buckets = 5;
    const Clock* clock = &RealClock::Instance();
  };
  explicit Summary(Options options);
  void Observe(double v);
  // One estimate per Options::quantiles, in that order; NaN when nothing was observed in the window.
  std::vector<double> Quantiles() const;
  const std::vector<double>& quantiles() const { return options_.quantiles; }
  double sum() const;
  uint64_t count() const;

 private:
  struct Slice {
    int64_t period = -1;  // which slice of time it counts: (now - start) / slice length
    std::map<int, uint64_t> counts;
  };
  int64_t PeriodOf(SteadyTime t) const;

  const Options options_;
  const SteadyTime start_;
  const std::chrono::nanoseconds slice_;
  mutable std::mutex mu_;
  std::vector<Slice> slices_;  // guarded by mu_; ring by period
  double sum_ = 0;             // guarded by mu_
  uint64_t count_ = 0;         // guarded by mu_
};

// Owns every metric; hands out stable pointers that stay valid for the registry's life. Getting a metric takes a
// lock, so callers keep the pointer; updating it does not. Renders the Prometheus text exposition format.
class MetricsRegistry {
 public:
  Counter* GetCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge* GetGauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram* GetHistogram(const std::string& name, const std::string& help, const Labels& labels = {},
                          std::vector<double> bounds = LatencyBuckets());
  Summary* GetSummary(const std::string& name, const std::string& help, const Labels& labels, Summary::Options options);

  // Whether the families that offer a latency summary make one (Triton's summary_latencies), and with what options.
  // Set before the series are created: a series made earlier keeps what it had.
  void SetLatencySummaries(std::optional<Summary::Options> options);
  std::optional<Summary::Options> latency_summaries() const;

  // Drops one series of `name` (any type) whose labels are exactly `labels`, so that a thing that is gone (a model
  // version unloaded) stops being exported. The pointers handed out for that series dangle afterwards: only their
  // owner may remove it, once it no longer uses them.
  void Remove(const std::string& name, const Labels& labels);

  // Every family but those whose name starts with `skip_prefix` (when not empty).
  std::string Exposition(std::string_view skip_prefix = {}) const;

 private:
  enum class Type { kCounter, kGauge, kHistogram, kSummary };
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
    std::map<std::string, std::unique_ptr<Summary>> summaries;
  };
  Family& GetFamily(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;             // guarded by mu_
  std::optional<Summary::Options> latency_summaries_;  // guarded by mu_
};

}  // namespace weft
