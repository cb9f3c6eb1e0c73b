#include "metrics/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "base/log.h"

namespace weft {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) buckets_[i].store(0);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> out(bounds_.size() + 1);
  for (size_t i = 0; i <= bounds_.size(); ++i) out[i] = buckets_[i].load(std::memory_order_relaxed);
  return out;
}

std::vector<double> LatencyBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

namespace {

constexpr int kSubBuckets = 64;  // per power of two
constexpr int kZeroBucket = std::numeric_limits<int>::min();

int BucketOf(double v) {
  if (!(v > 0)) return kZeroBucket;  // also NaN
  int exponent = 0;
  const double mantissa = std::frexp(v, &exponent);  // in [0.5, 1)
  const int sub = std::min(kSubBuckets - 1, static_cast<int>((mantissa - 0.5) * 2 * kSubBuckets));
  return exponent * kSubBuckets + sub;
}

double MiddleOf(int bucket) {
  if (bucket == kZeroBucket) return 0;
  // Floor division: buckets below 1 have negative exponents.
  int exponent = bucket / kSubBuckets;
  int sub = bucket % kSubBuckets;
  if (sub < 0) {
    sub += kSubBuckets;
    --exponent;
  }
  return std::ldexp(0.5 + (sub + 0.5) / (2.0 * kSubBuckets), exponent);
}

}  // namespace

Summary::Summary(Options options)
    : options_(std::move(options)),
      start_(options_.clock->Now()),
      slice_(std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(1),
                                                options_.max_age / std::max(1, options_.age_buckets))),
      slices_(static_cast<size_t>(std::max(1, options_.age_buckets))) {}

int64_t Summary::PeriodOf(SteadyTime t) const { return t < start_ ? 0 : (t - start_) / slice_; }

void Summary::Observe(double v) {
  const int64_t period = PeriodOf(options_.clock->Now());
  std::lock_guard lock(mu_);
  Slice& slice = slices_[static_cast<size_t>(period) % slices_.size()];
  if (slice.period != period) {
    slice.period = period;
    slice.counts.clear();
  }
  ++slice.counts[BucketOf(v)];
  sum_ += v;
  ++count_;
}

std::vector<double> Summary::Quantiles() const {
  const int64_t now = PeriodOf(options_.clock->Now());
  std::map<int, uint64_t> merged;
  uint64_t total = 0;
  {
    std::lock_guard lock(mu_);
    for (const Slice& slice : slices_) {
      if (slice.period < 0 || now - slice.period >= static_cast<int64_t>(slices_.size())) continue;
      for (const auto& [bucket, n] : slice.counts) {
        merged[bucket] += n;
        total += n;
      }
    }
  }
  std::vector<double> out;
  for (double q : options_.quantiles) {
    if (total == 0) {
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    // The smallest value with at least q of the observations at or below it (at least the first).
    const auto rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(total) - 1e-9)));
    uint64_t seen = 0;
    double value = MiddleOf(merged.rbegin()->first);
    for (const auto& [bucket, n] : merged) {
      seen += n;
      if (seen >= rank) {
        value = MiddleOf(bucket);
        break;
      }
    }
    out.push_back(value);
  }
  return out;
}

double Summary::sum() const {
  std::lock_guard lock(mu_);
  return sum_;
}

uint64_t Summary::count() const {
  std::lock_guard lock(mu_);
  return count_;
}

namespace {

std::string EscapeLabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// Renders labels as `a="x",b="y"` (no braces); the map key of a series.
std::string LabelKey(const Labels& labels) {
  std::string out;
  for (const auto& [k, v] : labels) {
    if (!out.empty()) out += ',';
    out += k + "=\"" + EscapeLabelValue(v) + "\"";
  }
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, end);
}

std::string Braced(const std::string& key, const std::string& extra = "") {
  std::string inner = key;
  if (!extra.empty()) inner += (inner.empty() ? "" : ",") + extra;
  return inner.empty() ? "" : "{" + inner + "}";
}

}  // namespace

MetricsRegistry::Family& MetricsRegistry::GetFamily(const std::string& name, const std::string& help, Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  }
  WEFT_CHECK(it->second.type == type) << "metric " << name << " registered with two types";
  return it->second;
}

Counter* MetricsRegistry::GetCounter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = GetFamily(name, help, Type::kCounter).counters[LabelKey(labels)];
  if (!slot) slot = std::make_unique<Counter>();
  return slot.get();
}

Gauge* MetricsRegistry::GetGauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = GetFamily(name, help, Type::kGauge).gauges[LabelKey(labels)];
  if (!slot) slot = std::make_unique<Gauge>();
  return slot.get();
}

Histogram* MetricsRegistry::GetHistogram(const std::string& name, const std::string& help, const Labels& labels,
                                         std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  auto& slot = GetFamily(name, help, Type::kHistogram).histograms[LabelKey(labels)];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return slot.get();
}

Summary* MetricsRegistry::GetSummary(const std::string& name, const std::string& help, const Labels& labels,
                                     Summary::Options options) {
  std::lock_guard lock(mu_);
  auto& slot = GetFamily(name, help, Type::kSummary).summaries[LabelKey(labels)];
  if (!slot) slot = std::make_unique<Summary>(std::move(options));
  return slot.get();
}

void MetricsRegistry::SetLatencySummaries(std::optional<Summary::Options> options) {
  std::lock_guard lock(mu_);
  latency_summaries_ = std::move(options);
}

std::optional<Summary::Options> MetricsRegistry::latency_summaries() const {
  std::lock_guard lock(mu_);
  return latency_summaries_;
}

void MetricsRegistry::Remove(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  const std::string key = LabelKey(labels);
  it->second.counters.erase(key);
  it->second.gauges.erase(key);
  it->second.histograms.erase(key);
  it->second.summaries.erase(key);
}

std::string MetricsRegistry::Exposition(std::string_view skip_prefix) const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, family] : families_) {
    if (!skip_prefix.empty() && name.starts_with(skip_prefix)) continue;
    out += "# HELP " + name + " " + family.help + "\n";
    switch (family.type) {
      case Type::kCounter:
        out += "# TYPE " + name + " counter\n";
        for (const auto& [key, c] : family.counters) out += name + Braced(key) + " " + Number(c->value()) + "\n";
        break;
      case Type::kGauge:
        out += "# TYPE " + name + " gauge\n";
        for (const auto& [key, g] : family.gauges) out += name + Braced(key) + " " + Number(g->value()) + "\n";
        break;
      case Type::kHistogram: {
        out += "# TYPE " + name + " histogram\n";
        for (const auto& [key, h] : family.histograms) {
          auto counts = h->BucketCounts();
          uint64_t cumulative = 0;
          for (size_t i = 0; i < counts.size(); ++i) {
            cumulative += counts[i];
            std::string le = i < h->bounds().size() ? Number(h->bounds()[i]) : "+Inf";
            out += name + "_bucket" + Braced(key, "le=\"" + le + "\"") + " " + std::to_string(cumulative) + "\n";
          }
          out += name + "_sum" + Braced(key) + " " + Number(h->sum()) + "\n";
          out += name + "_count" + Braced(key) + " " + std::to_string(cumulative) + "\n";
        }
        break;
      }
      case Type::kSummary:
        out += "# TYPE " + name + " summary\n";
        for (const auto& [key, summary] : family.summaries) {
          const std::vector<double> values = summary->Quantiles();
          for (size_t i = 0; i < values.size(); ++i) {
            out += name + Braced(key, "quantile=\"" + Number(summary->quantiles()[i]) + "\"") + " " +
                   Number(values[i]) + "\n";
          }
          out += name + "_sum" + Braced(key) + " " + Number(summary->sum()) + "\n";
          out += name + "_count" + Braced(key) + " " + std::to_string(summary->count()) + "\n";
        }
        break;
    }
  }
  return out;
}

}  // namespace weft
