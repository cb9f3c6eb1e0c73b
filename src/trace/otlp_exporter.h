#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "base/retry.h"
#include "metrics/metrics.h"
#include "trace/span.h"
#include "trace/trace_settings.h"

namespace weft {

// Where an OTLP/HTTP exporter sends: `http://host[:port]/path` or `https://...` (parsed, but not yet supported by
// the exporter). An IPv6 host keeps its brackets.
struct OtlpUrl {
  bool tls = false;
  std::string host;
  uint16_t port = 80;
  std::string target = "/";  // path and query as sent in the request line
};
// InvalidArgument for another scheme, a missing host or a bad port.
Result<OtlpUrl> ParseOtlpUrl(std::string_view url);

// Sends finished spans to an OpenTelemetry collector over OTLP/HTTP with protobuf, off the request path: Add only
// queues (bounded: beyond max_queue_size spans are dropped and counted), one background thread sends batches of at
// most max_export_batch_size spans, each when it is full or schedule_delay after its oldest span was queued. A
// failed send is retried (connection errors, timeouts, 429, 502, 503, 504) with exponential backoff and jitter, up to
// max_attempts tries within `timeout`; then its spans are dropped and counted. Thread-safe.
class OtlpExporter {
 public:
  struct Options {
    std::string url = "http://localhost:4318/v1/traces";
    std::vector<std::pair<std::string, std::string>> resource;  // resource attributes, e.g. service.name
    size_t max_queue_size = 2048;
    size_t max_export_batch_size = 512;
    std::chrono::milliseconds schedule_delay{5000};
    std::chrono::milliseconds timeout{10000};  // per batch, all its tries together; also the destructor's limit
    int max_attempts = 5;
    std::chrono::milliseconds initial_backoff{100};
    std::chrono::milliseconds max_backoff{5000};  // also caps a Retry-After
  };
  // Not owned; they must outlive the exporter. Null = not counted.
  struct Counters {
    Counter* exported = nullptr;        // spans the collector accepted
    Counter* dropped = nullptr;         // spans lost: queue full, export failed, rejected, left at shutdown
    Counter* failed_exports = nullptr;  // requests given up on (after their retries, or not retryable)
  };

  // The url, resource, queue and batch sizes and the delay of `s`; the rest as Options' defaults.
  static Options OptionsFrom(const TraceSettings& s);

  OtlpExporter(Options options, Counters counters);
  // Sends what is queued, giving up after options.timeout (the rest is dropped and counted), then stops the thread.
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues `spans`, as many as there is room for. Never waits for the network.
  void Add(std::vector<SpanData> spans);
  // Queues `count` spans already encoded by AppendOtlpSpan, all of them or none: a request's spans stay together, so
  // a full queue never leaves a trace with holes. Never waits for the network.
  void AddEncoded(std::string encoded, size_t count);
  // Replaces the options; the queue bound applies at once, the rest from the next batch on.
  void SetOptions(Options options);
  // Sends everything queued now without waiting for the delay; true when all of it was sent or dropped within
  // `wait`. Blocks the caller up to `wait`.
  bool Flush(std::chrono::milliseconds wait);

 private:
  struct ThreadState;  // the connection and what else only the thread touches (otlp_exporter.cc)

  void Run();
  // Sends one batch with its retries; counts and logs the outcome.
  void Export(ThreadState& state, std::string encoded, size_t count, const Options& options);
  // Appends encoded spans (`ends`: where each record ends in `encoded`, and its span count) as far as `room` spans
  // allow; the number appended. Takes mu_.
  size_t Enqueue(std::string_view encoded, std::span<const std::pair<size_t, size_t>> records, bool whole);
  // Sleeps on the thread until `until`; false when the shutdown deadline comes first.
  bool SleepUntil(SteadyTime until);
  // Whether the destructor's deadline has passed: what is in flight is abandoned.
  bool StopDeadlinePassed();
  static void Count(Counter* counter, double n);

  // Constant after construction.
  const Counters counters_;

  std::mutex mu_;
  std::condition_variable work_cv_;  // the thread waits for spans, a flush, the shutdown
  std::condition_variable done_cv_;  // Flush waits for batches to finish
  // Guarded by mu_.
  Options options_;
  // In arrival order. A vector, not a deque of nodes: a whole batch leaves by a swap, and Add appends without an
  // allocation per span once the vector has grown.
  std::string queue_;  // encoded spans, in arrival order
  // Where each queued record ends in queue_, and its spans: a batch is cut at a record's end.
  std::vector<std::pair<size_t, size_t>> records_;
  size_t queued_spans_ = 0;
  SteadyTime oldest_{};          // when the oldest queued span came (at most that): the delay runs from it
  uint64_t queued_total_ = 0;    // spans ever queued (the sequence number of the next one)
  uint64_t taken_total_ = 0;     // spans the thread took out of the queue, in order
  uint64_t finished_total_ = 0;  // of those, the ones sent or dropped
  uint64_t flush_until_ = 0;     // the thread sends without waiting for the delay while taken_total_ is below it
  bool stopping_ = false;
  SteadyTime stop_deadline_{};  // with stopping_: when the destructor gives up
  LogRateLimiter drop_log_{std::chrono::seconds(10)};

  std::thread thread_;  // last: it starts once everything above exists
};

}  // namespace weft
