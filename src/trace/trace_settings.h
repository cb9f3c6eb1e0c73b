#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace weft {

// Where sampled requests go: Triton's JSON timestamps file, or spans over OTLP/HTTP.
enum class TraceMode { kTriton, kOpenTelemetry };

// The server's trace settings (`--trace-config`, `/v2/trace/setting`, gRPC TraceSetting). All of them change at run
// time. The names and defaults are Triton's (docs/user_guide/trace.md) unless marked weft.
struct TraceSettings {
  TraceMode mode = TraceMode::kTriton;
  bool timestamps = false;  // trace_level: ["OFF"] = false, ["TIMESTAMPS"] = true; nothing is traced when false
  uint64_t rate = 1000;     // trace_rate: one in `rate` requests that bring no sampled caller context; 0 = none
  int64_t count = -1;       // trace_count: how many more requests to trace; -1 = no limit; counts down
  // weft: a request whose `traceparent` carries the sampled flag is traced, one whose flag is clear is not,
  // whatever the rate (W3C's parent-based sampling); false = the rate decides for every request.
  bool parent_based = true;
  std::string file;            // triton mode: trace_file, where the JSON goes ("" = nowhere)
  uint64_t log_frequency = 0;  // triton mode: write a new file every this many traces; 0 = at shutdown
  // opentelemetry mode:
  std::string otel_url = "http://localhost:4318/v1/traces";
  std::vector<std::pair<std::string, std::string>> otel_resource = {{"service.name", "weft"}};
  size_t bsp_max_queue_size = 2048;        // spans waiting for export; beyond it they are dropped and counted
  size_t bsp_max_export_batch_size = 512;  // spans per OTLP request
  std::chrono::milliseconds bsp_schedule_delay{5000};  // the longest a span waits before its batch goes
};

// What one model overrides (`/v2/models/{m}/trace/setting`): unset fields follow the server's settings.
struct ModelTraceSettings {
  std::optional<bool> timestamps;
  std::optional<uint64_t> rate;
  std::optional<int64_t> count;
};

// A settings update as both protocols carry it: setting name -> values (Triton sends every value as a string or a
// list of strings); nullopt = clear it (a model's setting returns to the server's).
using TraceSettingUpdate = std::map<std::string, std::optional<std::vector<std::string>>>;

// The bounds every parse and update below enforces, so that a TraceSettings they return always satisfies them.
inline constexpr uint64_t kMaxTraceRate = uint64_t{1} << 32;
inline constexpr size_t kMaxBspQueueSize = 1'000'000;  // and bsp_max_export_batch_size <= bsp_max_queue_size
inline constexpr std::chrono::milliseconds kMaxBspScheduleDelay{600'000};  // and at least 1 ms

// Parses the values of every `--trace-config` flag, in order, onto `base`. Triton's forms (docs/user_guide/trace.md):
// "<setting>=<value>" for mode, level, rate, count, parent_based, and "<mode>,<setting>=<value>" for triton's file
// and log-frequency (or log_frequency) and opentelemetry's url, resource, bsp_max_queue_size,
// bsp_max_export_batch_size and bsp_schedule_delay (ms); these may also be given without their mode. A later flag
// replaces an earlier one's value, but `resource=key=value` adds one attribute (replacing the one of that key, the
// default service.name included). InvalidArgument, quoting the flag, for an unknown setting or mode, a setting under
// another mode, a bad or out-of-range number, level TENSORS, or a url that is not http://. Pure.
Result<TraceSettings> ParseTraceConfig(const std::vector<std::string>& flags, TraceSettings base = {});

// Applies an update from POST /v2/trace/setting or gRPC TraceSetting, by API name: trace_mode, trace_level (["OFF"]
// or ["TIMESTAMPS"]), trace_rate, trace_count, trace_file, log_frequency, parent_based, opentelemetry_url,
// opentelemetry_resource (a list of "key=value" that replaces the attributes), opentelemetry_bsp_max_queue_size,
// opentelemetry_bsp_max_export_batch_size, opentelemetry_bsp_schedule_delay (ms). Every other setting takes exactly
// one value. trace_file may only be given its current value: as in Triton, the network cannot choose where the
// server writes. All or nothing: InvalidArgument naming the first setting refused, including one given null (a
// server-wide setting has nothing to return to). Pure.
Result<TraceSettings> ApplyTraceSettingUpdate(const TraceSettings& current, const TraceSettingUpdate& update);

// The same for one model's overrides (/v2/models/{m}/trace/setting): only trace_level, trace_rate and trace_count;
// null clears an override. The other settings are InvalidArgument that says they are server-wide. Pure.
Result<ModelTraceSettings> ApplyModelTraceSettingUpdate(const ModelTraceSettings& current,
                                                        const TraceSettingUpdate& update);

// What GET answers: every setting above by its API name, values as strings (trace_level holds one value,
// opentelemetry_resource one "key=value" per attribute). With `model`, its overrides replace the server's
// trace_level, trace_rate and trace_count. The server's view, applied as an update, gives back the same settings.
std::map<std::string, std::vector<std::string>> TraceSettingsView(const TraceSettings& server,
                                                                  const ModelTraceSettings* model);

}  // namespace weft
