#include "metrics/metrics.h"

#include <charconv>
#include <cmath>

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

void MetricsRegistry::Remove(const std::string& name, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return;
  const std::string key = LabelKey(labels);
  it->second.counters.erase(key);
  it->second.gauges.erase(key);
  it->second.histograms.erase(key);
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
    }
  }
  return out;
}

}  // namespace weft
