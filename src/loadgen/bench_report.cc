#include "loadgen/bench_report.h"

#include <cstdio>

#include "loadgen/json_text.h"

namespace weft {

namespace {

double Ms(std::chrono::nanoseconds d) { return static_cast<double>(d.count()) / 1e6; }

std::string Format(const char* format, auto... args) {
  char buffer[256];
  int n = std::snprintf(buffer, sizeof(buffer), format, args...);
  return std::string(buffer, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof(buffer) - 1));
}

std::string TensorFormat(const BenchOptions& o) {
  if (!o.input_data_path.empty()) return "input_data";
  if (o.shared_memory == SharedMemoryMode::kSystem) return "system_shared_memory";
  if (o.shared_memory == SharedMemoryMode::kCuda) return "cuda_shared_memory";
  if (o.protocol == Protocol::kGrpc) return "raw";
  return o.binary ? "binary" : "json";
}

const char* ProtocolName(const BenchOptions& o) { return o.protocol == Protocol::kGrpc ? "grpc" : "http"; }

std::string LoadText(const BenchOptions& o) {
  std::string threads = Format("%d thread%s", o.threads, o.threads == 1 ? "" : "s");
  if (o.mode == LoadMode::kClosedLoop) return Format("closed loop, concurrency %d, ", o.concurrency) + threads;
  return Format("open loop, %g req/s %s, at most %d connections, ", o.request_rate,
                o.arrivals == Arrivals::kPoisson ? "poisson" : "constant", o.max_connections) +
         threads;
}

std::string LatencyColumns(const LatencySummary& l) {
  return Format("%10.3f %10.3f %10.3f %10.3f %10.3f %10.3f", l.mean_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms,
                l.max_ms);
}

void JsonKey(std::string_view key, std::string* out) {
  if (out->back() != '{') out->push_back(',');
  AppendJsonString(out, key);
  out->push_back(':');
}

void JsonLatency(const LatencySummary& l, std::string* out) {
  out->push_back('{');
  JsonKey("count", out);
  JsonNumber(l.count, out);
  const std::pair<const char*, double> fields[] = {{"mean", l.mean_ms}, {"p50", l.p50_ms},    {"p90", l.p90_ms},
                                                   {"p99", l.p99_ms},   {"p99_9", l.p999_ms}, {"max", l.max_ms}};
  for (const auto& [key, value] : fields) {
    JsonKey(key, out);
    JsonNumber(value, out);
  }
  out->push_back('}');
}

}  // namespace

LatencySummary Summarize(const LatencyHistogram& h) {
  return LatencySummary{.count = h.count(),
                        .mean_ms = Ms(h.mean()),
                        .p50_ms = Ms(h.Percentile(0.5)),
                        .p90_ms = Ms(h.Percentile(0.9)),
                        .p99_ms = Ms(h.Percentile(0.99)),
                        .p999_ms = Ms(h.Percentile(0.999)),
                        .max_ms = Ms(h.max())};
}

BenchReport BuildReport(const BenchOptions& options, const RunStats& stats, std::chrono::duration<double> measured) {
  BenchReport report;
  report.options = options;
  report.duration_s = measured.count();
  report.sent = stats.sent;
  report.started_late = stats.started_late;
  report.peak_connections = stats.peak_connections;
  LatencyHistogram successes;
  std::map<int, const LatencyHistogram*> outcomes;
  for (int failure : {kOutcomeConnectError, kOutcomeIoError, kOutcomeTimeout}) outcomes[failure] = nullptr;
  for (const auto& [outcome, histogram] : stats.outcomes) outcomes[outcome] = &histogram;
  for (const auto& [outcome, histogram] : outcomes) {
    OutcomeSummary summary{.outcome = outcome, .name = OutcomeName(outcome)};
    if (histogram) summary.count = histogram->count();
    if (IsAnswer(outcome)) {
      summary.latency = Summarize(*histogram);
      report.answered += summary.count;
    } else {
      report.unanswered += summary.count;
    }
    if (IsSuccess(outcome)) {
      successes.Merge(*histogram);
      report.successes += summary.count;
    }
    if (auto error = stats.first_errors.find(outcome); error != stats.first_errors.end()) {
      summary.first_error = error->second;
    }
    report.outcomes.push_back(std::move(summary));
  }
  report.latency = Summarize(successes);
  if (report.duration_s > 0) {
    report.sent_per_s = static_cast<double>(report.sent) / report.duration_s;
    report.throughput_rps = static_cast<double>(report.successes) / report.duration_s;
    report.inferences_per_s = report.throughput_rps * static_cast<double>(options.batch_size);
  }
  return report;
}

std::string RenderTable(const BenchReport& r) {
  const BenchOptions& o = r.options;
  std::string out;
  out +=
      "model       " + o.model + (o.model_version.empty() ? "" : " version " + o.model_version) + " at " + o.url + "\n";
  out += "load        " + LoadText(o) + "\n";
  out += Format("requests    %s, %s tensors, batch size %lld\n", ProtocolName(o), TensorFormat(o).c_str(),
                static_cast<long long>(o.batch_size));
  out += Format("measured    %.3f s after %.3f s of warmup\n\n", r.duration_s, o.warmup.count());

  out += Format("throughput  %.1f req/s   %.1f infer/s   (sent %.1f req/s)\n", r.throughput_rps, r.inferences_per_s,
                r.sent_per_s);
  if (r.latency.count > 0) {
    out += Format("latency     p50 %.3f   p90 %.3f   p99 %.3f   p99.9 %.3f   max %.3f ms   (2xx)\n\n", r.latency.p50_ms,
                  r.latency.p90_ms, r.latency.p99_ms, r.latency.p999_ms, r.latency.max_ms);
  } else {
    out += "latency     no 2xx answers\n\n";
  }

  out += Format("%-14s %10s %10s %10s %10s %10s %10s %10s\n", "outcome", "count", "mean ms", "p50 ms", "p90 ms",
                "p99 ms", "p99.9 ms", "max ms");
  for (const OutcomeSummary& s : r.outcomes) {
    out += Format("%-14s %10llu", s.name.c_str(), static_cast<unsigned long long>(s.count));
    if (s.latency && s.count > 0) out += " " + LatencyColumns(*s.latency);
    out += "\n";
  }
  out += Format("\nsent %llu = answered %llu + unanswered %llu   %s\n", static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.answered), static_cast<unsigned long long>(r.unanswered),
                r.consistent() ? "(consistent)" : "(INCONSISTENT: a bug in weft bench)");
  if (o.mode == LoadMode::kOpenLoop) {
    out += Format("open loop   %llu started late (more than 1 ms behind schedule), %llu connections opened\n",
                  static_cast<unsigned long long>(r.started_late), static_cast<unsigned long long>(r.peak_connections));
  }
  bool header = false;
  for (const OutcomeSummary& s : r.outcomes) {
    if (s.first_error.empty()) continue;
    if (!header) out += "first error of each kind:\n";
    header = true;
    out += "  " + s.name + ": " + s.first_error + "\n";
  }
  return out;
}

std::string RenderJson(const BenchReport& r) {
  const BenchOptions& o = r.options;
  std::string out = "{";
  JsonKey("model", &out);
  AppendJsonString(&out, o.model);
  JsonKey("model_version", &out);
  AppendJsonString(&out, o.model_version);
  JsonKey("url", &out);
  AppendJsonString(&out, o.url);
  JsonKey("protocol", &out);
  AppendJsonString(&out, ProtocolName(o));
  JsonKey("tensor_format", &out);
  AppendJsonString(&out, TensorFormat(o));
  JsonKey("batch_size", &out);
  JsonNumber(o.batch_size, &out);

  JsonKey("load", &out);
  out.push_back('{');
  JsonKey("mode", &out);
  if (o.mode == LoadMode::kClosedLoop) {
    AppendJsonString(&out, "closed_loop");
    JsonKey("concurrency", &out);
    JsonNumber(o.concurrency, &out);
  } else {
    AppendJsonString(&out, "open_loop");
    JsonKey("request_rate", &out);
    JsonNumber(o.request_rate, &out);
    JsonKey("arrivals", &out);
    AppendJsonString(&out, o.arrivals == Arrivals::kPoisson ? "poisson" : "constant");
    JsonKey("max_connections", &out);
    JsonNumber(o.max_connections, &out);
  }
  JsonKey("threads", &out);
  JsonNumber(o.threads, &out);
  out.push_back('}');

  JsonKey("warmup_s", &out);
  JsonNumber(o.warmup.count(), &out);
  JsonKey("duration_s", &out);
  JsonNumber(r.duration_s, &out);
  const std::pair<const char*, uint64_t> counts[] = {
      {"sent", r.sent}, {"answered", r.answered}, {"unanswered", r.unanswered}, {"successes", r.successes}};
  for (const auto& [key, value] : counts) {
    JsonKey(key, &out);
    JsonNumber(value, &out);
  }
  JsonKey("consistent", &out);
  out += r.consistent() ? "true" : "false";
  JsonKey("sent_per_s", &out);
  JsonNumber(r.sent_per_s, &out);
  JsonKey("throughput", &out);
  out.push_back('{');
  JsonKey("requests_per_s", &out);
  JsonNumber(r.throughput_rps, &out);
  JsonKey("inferences_per_s", &out);
  JsonNumber(r.inferences_per_s, &out);
  out.push_back('}');
  JsonKey("latency_ms", &out);
  JsonLatency(r.latency, &out);

  JsonKey("outcomes", &out);
  out.push_back('{');
  for (const OutcomeSummary& s : r.outcomes) {
    JsonKey(s.name, &out);
    out.push_back('{');
    JsonKey("count", &out);
    JsonNumber(s.count, &out);
    if (s.latency) {
      JsonKey("latency_ms", &out);
      JsonLatency(*s.latency, &out);
    }
    if (!s.first_error.empty()) {
      JsonKey("first_error", &out);
      AppendJsonString(&out, s.first_error);
    }
    out.push_back('}');
  }
  out.push_back('}');
  JsonKey("started_late", &out);
  JsonNumber(r.started_late, &out);
  JsonKey("peak_connections", &out);
  JsonNumber(r.peak_connections, &out);
  out += "}\n";
  return out;
}

}  // namespace weft
