#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/bench_options.h"
#include "loadgen/latency_histogram.h"
#include "loadgen/run_stats.h"

namespace weft {

struct LatencySummary {
  uint64_t count = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  double p999_ms = 0;
  double max_ms = 0;
};

LatencySummary Summarize(const LatencyHistogram& histogram);

struct OutcomeSummary {
  int outcome = 0;  // an HTTP status or kOutcome*
  std::string name;
  uint64_t count = 0;
  std::optional<LatencySummary> latency;  // for answers (HTTP statuses), not for failures without one
  std::string first_error;                // not 2xx: the first answer's body or failure, one line
};

// The result of a run: what ran (the options) and what happened. Built by BuildReport, rendered by RenderTable
// and RenderJson, which show the same fields.
struct BenchReport {
  BenchOptions options;
  double duration_s =
      0;  // measured: from the end of warmup to the end of sending or the last answer, whichever is later
  uint64_t sent = 0;
  uint64_t answered = 0;    // any HTTP status
  uint64_t unanswered = 0;  // connect_error + io_error + timeout
  uint64_t successes = 0;   // 2xx
  double sent_per_s = 0;    // the offered rate
  double throughput_rps = 0;
  double inferences_per_s = 0;  // throughput_rps * batch size
  LatencySummary latency;       // 2xx answers
  // Every HTTP status seen, ascending, then connect_error, io_error and timeout (always, 0 or not).
  std::vector<OutcomeSummary> outcomes;
  uint64_t started_late = 0;
  uint64_t peak_connections = 0;

  // Every request sent ended in exactly one outcome.
  bool consistent() const { return sent == answered + unanswered; }
};

// `measured` is the window the throughput is over (see duration_s).
BenchReport BuildReport(const BenchOptions& options, const RunStats& stats, std::chrono::duration<double> measured);

// A readable report for a terminal, ending with a newline.
std::string RenderTable(const BenchReport& report);
// One JSON object with stable keys (docs/loadgen.md lists them), ending with a newline.
std::string RenderJson(const BenchReport& report);

}  // namespace weft
